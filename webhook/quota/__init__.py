"""GPU quotas per namespace: pod demand, the GPUQuota policy kind, checks, reservations, status.

The pure core is `demand`, `usage`, `policy` and `check`; `gate` and `ledger` add the
in-flight reservations that make concurrent admissions exact.
"""
