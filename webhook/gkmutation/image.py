"""Image references split as AssignImage splits them, and its parameter checks. Pure.

From Gatekeeper's pkg/mutation/mutators/assignimage/imageparser.go: the domain is the part
before the first '/' when it holds a '.' or ':' or is `localhost`; the tag is everything from
the first ':' or '@' after it. Unset parameters keep the image's own part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Go's \w is ASCII, and its $ matches only at the very end: re.ASCII and fullmatch/\Z.
_DOMAIN = re.compile(r"(\w[\w\-_]*\.[\w\-_\.]*[\w](:\d+)?)|(localhost(:\d+)?)", re.ASCII)
_PATH = re.compile(r"[a-z0-9]+(?:(?:(?:[._/]|__|[-]*)[a-z0-9]+)+)?")
_TAG = re.compile(
    r"(:[\w][\w.-]{0,127})|(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9A-Fa-f]{32,})", re.ASCII
)


@dataclass(frozen=True)
class Image:
    domain: str
    path: str
    tag: str

    @classmethod
    def parse(cls, reference: str) -> Image:
        domain, rest = split_domain(reference)
        path, tag = split_tag(rest)
        return cls(domain, path, tag)

    def assigned(self, domain: str, path: str, tag: str) -> Image:
        return Image(domain or self.domain, path or self.path, tag or self.tag)

    def reference(self) -> str:
        return (f"{self.domain}/" if self.domain else "") + self.path + self.tag


def split_domain(name: str) -> tuple[str, str]:
    slash = name.find("/")
    if slash == -1 or (not any(c in name[:slash] for c in ".:") and name[:slash] != "localhost"):
        return "", name
    return name[:slash], name[slash + 1 :]


def split_tag(rest: str) -> tuple[str, str]:
    found = [i for i in (rest.find(":"), rest.find("@")) if i != -1]
    if not found:
        return rest, ""
    cut = min(found)
    return rest[:cut], rest[cut:]


def parameter_problems(domain: str, path: str, tag: str) -> list[tuple[str, str]]:
    """(parameter, reason) for each AssignImage parameter Gatekeeper refuses (validateImageParts)."""
    if not (domain or path or tag):
        return [("", "at least one of assignDomain, assignPath or assignTag must be set")]
    problems = []
    if domain and (not _DOMAIN.fullmatch(domain) or split_domain(domain + "/") != (domain, "")):
        problems.append(("assignDomain", f"{domain!r} must be a fully-qualified domain name or localhost"))
    matched = _PATH.match(path)
    if path and (matched is None or matched.group(0) != path):
        problems.append(("assignPath", f"{path!r} must be a valid image path"))
    if tag and (not _TAG.fullmatch(tag) or split_tag(tag) != ("", tag)):
        problems.append(("assignTag", f"{tag!r} must be an image tag or digest starting with ':' or '@'"))
    if not domain and split_domain(path)[0]:
        reason = f"assignDomain must be set when the first part of assignPath {path!r} reads as a domain"
        problems.append(("assignPath", reason))
    return problems
