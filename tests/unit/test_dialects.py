"""Each protocol ``airlock serve`` speaks is stated once (``serve.DIALECTS``): its prefixes, its
routes, whether a key guards it and whether its requests start work. The door names, guards and
admits a request by the same statement the router routes it by: every route is spoken by the
dialect that declares it, and only the data plane (guarded by each sandbox's token) goes keyless
among the routes that reach sandboxes."""

from __future__ import annotations

from starlette.routing import Route

from engine.serve import DIALECTS


def test_every_route_belongs_to_the_dialect_that_declares_it() -> None:
    for dialect in DIALECTS:
        for route in dialect.routes:
            assert isinstance(route, Route)
            speaker = next(d for d in DIALECTS if d.speaks(route.path))
            assert speaker is dialect, f"{route.path} is declared by {dialect.name} but spoken by {speaker.name}"


def test_the_work_dialects_are_guarded_and_the_last_answers_everything_else() -> None:
    assert all(d.guarded for d in DIALECTS if d.work)
    assert {d.name for d in DIALECTS if d.work} == {"sandbox_fusion", "piston", "batch"}
    assert DIALECTS[-1].name == "envd" and DIALECTS[-1].speaks("/anything") and not DIALECTS[-1].guarded
    paths = [route.path for d in DIALECTS for route in d.routes if isinstance(route, Route)]
    assert "/metrics" in paths and next(d for d in DIALECTS if d.speaks("/metrics")).guarded
