"""What the heavy-lane estimate learned of a request, kept for the review that follows it.

The server measures every request's objects against the size bounds before it picks a lane
(webhook.validation.bounds); review() would measure them again. Requests the server parsed are
never changed in place, so what was measured of one (by identity) holds for its review. Only
ordinary requests are kept, at most MAX_KEPT at a time: a review that never comes (an overloaded
server answers without one) costs a slot until the next clear, never memory without bound.
"""

from __future__ import annotations

from webhook.types import AdmissionRequest
from webhook.validation import bounds

MAX_KEPT = 64


class Measured:
    def __init__(self) -> None:
        self._kept: dict[int, tuple[AdmissionRequest, bounds.Checked]] = {}

    def is_heavy(self, request: AdmissionRequest, body_bytes: int) -> bool:
        """bounds.heavy_within_bounds(), remembering an ordinary request found within them."""
        obj, old = request.get("object"), request.get("oldObject")
        heavy, checked = bounds.estimate(obj, old, body_bytes)
        if checked is not None and not heavy:
            if len(self._kept) >= MAX_KEPT:
                self._kept.clear()
            self._kept[id(request)] = (request, checked)
        return heavy and checked is not None

    def checked(self, request: AdmissionRequest) -> bounds.Checked | None:
        kept = self._kept.get(id(request))
        return kept[1] if kept is not None and kept[0] is request else None

    def forget(self, request: AdmissionRequest) -> None:
        kept = self._kept.get(id(request))
        if kept is not None and kept[0] is request:
            del self._kept[id(request)]
