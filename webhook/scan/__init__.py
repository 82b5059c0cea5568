"""The background audit of existing objects: judge Pods, workloads and Namespaces as /validate would.

`gpu-webhook scan` runs it once; `serve --scan-interval` runs it periodically on the
one replica that holds the scan Lease. Findings stream into the audit log as `scan`
records and into per-policy gauges on /metrics.
"""
