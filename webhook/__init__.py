"""gpu-webhook: an admission-policy engine for GPU workloads on Kubernetes."""

__version__ = "0.1.0"
