"""mode dra's ResourceClaimTemplate keeper: the loop the Lease holder runs (`loop`) and its wiring
from the settings and the cluster state (`setup`). The plan it follows is pure, in webhook.dra.sync."""
