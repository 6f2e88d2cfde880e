"""The registered trust boundaries (`privrl.trust`): names, labels and colours, for clients and
the dashboard."""

from __future__ import annotations

from privrl import trust
from privrl.protocol import BoundaryInfo
from privrl.server.routes.common import v1_router

router = v1_router(["public"], prefix="/v1")


@router.get("/trust", response_model=list[BoundaryInfo], summary="The trust boundaries")
async def boundaries() -> list[BoundaryInfo]:
    """Every trust boundary a run may use, the built-ins first."""
    return [BoundaryInfo(name=b.name, label=b.label, colour=b.colour, summary=b.summary,
                         private=b.private, local_noise=b.local_noise,
                         cohorts=b.cohorts)
            for b in map(trust.get, trust.names())]
