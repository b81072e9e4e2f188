"""``otel-replay db init``: the Collector exporter's tables created, or their DDL printed.

It must never open a store when asked only to print the DDL, or import the storage package at module level.
"""

from __future__ import annotations

import sys

import typer

from .app import STORE_HELP, db_app, handled, open_store, out_console

# ---------------------------------------------------------------------------------------------------- db


@db_app.command("init")
@handled
def db_init_command(
    store_url: str | None = typer.Option(None, "--store", help=STORE_HELP),
    cluster: str | None = typer.Option(None, "--cluster", help="Create ON CLUSTER with Replicated engines."),
    ttl: int | None = typer.Option(None, "--ttl", min=1, help="Keep spans this many days."),
    print_only: bool = typer.Option(False, "--print", help="Print the DDL instead of running it."),
) -> None:
    """Create (or print) the Collector exporter's tables: otel_traces and the trace-id lookup."""
    from ..storage import ddl

    if print_only:
        sys.stdout.write(ddl.render_script(cluster=cluster, ttl_days=ttl))
        return
    with open_store(store_url) as store:
        store.init_schema(cluster=cluster, ttl_days=ttl)
        out_console().print(f"schema ready in {store.describe()}")
