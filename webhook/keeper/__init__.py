"""mode dra's ResourceClaimTemplate keeper: the loop the Lease holder runs (`loop`), its wiring
from the settings and the cluster state (`setup`), and the resource.k8s.io version it writes in
(`versions`). The plan it follows is pure, in webhook.dra.sync."""
