"""Kubernetes' native admission policies (ValidatingAdmissionPolicy, MutatingAdmissionPolicy) and
their bindings, enforced as kube-apiserver enforces them. Core layer: pure, no I/O."""
