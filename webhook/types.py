"""The wire format: TypedDicts for AdmissionReview admission.k8s.io/v1 and Kubernetes objects.

A leaf module. Objects from the cluster are untrusted; `admission.parse_review`
checks the shape before anything is typed as one of these.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

JSON: TypeAlias = Any
KubeObject: TypeAlias = dict[str, Any]
# "advisory" is /validate-advisory: warn and dryrun policies only, behind a failurePolicy: Ignore webhook.
Endpoint: TypeAlias = Literal["mutate", "validate", "advisory"]
EnforcementAction: TypeAlias = Literal["deny", "warn", "dryrun"]

ADMISSION_API_VERSION = "admission.k8s.io/v1"
ADMISSION_KIND = "AdmissionReview"


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class GroupVersionResource(TypedDict):
    group: str
    version: str
    resource: str


class UserInfo(TypedDict, total=False):
    username: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]


class AdmissionRequest(TypedDict):
    uid: str
    kind: GroupVersionKind
    resource: NotRequired[GroupVersionResource]
    subResource: NotRequired[str]
    requestKind: NotRequired[GroupVersionKind]
    requestResource: NotRequired[GroupVersionResource]
    name: NotRequired[str]
    namespace: NotRequired[str]
    operation: str
    userInfo: NotRequired[UserInfo]
    object: KubeObject | None
    oldObject: NotRequired[KubeObject | None]
    dryRun: NotRequired[bool]
    options: NotRequired[KubeObject | None]


class Status(TypedDict, total=False):
    code: int
    message: str
    reason: str


class AdmissionResponse(TypedDict):
    uid: str
    allowed: bool
    status: NotRequired[Status]
    patch: NotRequired[str]
    patchType: NotRequired[Literal["JSONPatch"]]
    warnings: NotRequired[list[str]]
    auditAnnotations: NotRequired[dict[str, str]]


class AdmissionReviewRequest(TypedDict):
    apiVersion: str
    kind: str
    request: AdmissionRequest


class AdmissionReviewResponse(TypedDict):
    apiVersion: str
    kind: str
    response: AdmissionResponse


# "from" is a Python keyword, hence the functional form.
PatchOperation = TypedDict(
    "PatchOperation",
    {"op": str, "path": str, "value": NotRequired[JSON], "from": NotRequired[str]},
)
