"""Every key of the Collector configs is one the pinned Collector accepts (a typo or a removed key fails here).

The allowed keys per component type come from ``tests/data/collector_schema_v0.152.json``, written from the
mapstructure tags of the upstream sources it names (Collector core v0.152.0, contrib 0.152). Each config is
checked as committed and in its TLS/auth variant (the ``#! `` lines uncommented, the lines marked
``# without TLS/auth`` removed), so the commented blocks are as valid as the live ones. The secured agent must
dial exactly what the secured gateway accepts, and the operations guide's agent → gateway snippet must be the
agent config's exporter. The compose file and Grafana provisioning get a cheaper check of their top-level keys.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "tests" / "data" / "collector_schema_v0.152.json").read_text(encoding="utf-8"))
CONFIGS = {p.name: p for p in sorted((ROOT / "collector-config").glob("*.yaml"))}
SECTIONS = ("receivers", "processors", "exporters", "extensions", "connectors")
PLAIN_ONLY = "# without TLS/auth"


def secured(text: str) -> str:
    """The TLS/auth variant of a config: ``#! `` lines uncommented, lines marked plain-only removed."""
    lines = []
    for line in text.splitlines():
        if line.rstrip().endswith(PLAIN_ONLY):
            continue
        lines.append(line[3:] if line.startswith("#! ") else line)
    return "\n".join(lines) + "\n"


def _variants() -> list[Any]:
    cases = []
    for name, path in CONFIGS.items():
        text = path.read_text(encoding="utf-8")
        cases.append(pytest.param(name, text, id=f"{name}-plain"))
        if "\n#! " in text:
            cases.append(pytest.param(name, secured(text), id=f"{name}-tls"))
    return cases


def unknown_keys(value: Any, node: Any, path: str) -> list[str]:
    """Paths of the keys in ``value`` that the schema ``node`` does not allow."""
    if node is None or value is None:
        return []
    if isinstance(value, list):
        item = node.get("[]") if isinstance(node, dict) else None
        return [p for i, v in enumerate(value) for p in unknown_keys(v, item, f"{path}[{i}]")] if item else []
    if not isinstance(value, dict):
        return []
    problems = []
    for key, sub in value.items():
        if key in node:
            problems += unknown_keys(sub, node[key], f"{path}.{key}")
        elif "*" in node:
            problems += unknown_keys(sub, node["*"], f"{path}.{key}")
        else:
            problems.append(f"{path}.{key}")
    return problems


def config_problems(config: dict[str, Any]) -> list[str]:
    """Unknown top-level sections, component types and keys of one Collector config."""
    problems = [f"unknown section {k}" for k in config if k not in (*SECTIONS, "service")]
    for section in SECTIONS:
        for component_id, settings in (config.get(section) or {}).items():
            kind = component_id.split("/", 1)[0]
            if kind in SCHEMA.get("deprecated_types", {}).get(section, []):
                problems.append(f"{section}.{component_id}: deprecated type {kind!r}")
                kind = SCHEMA["aliases"][section][kind]
            if kind not in SCHEMA[section]:
                problems.append(f"{section}.{component_id}: unknown component type {kind!r}")
                continue
            problems += unknown_keys(settings, SCHEMA[section][kind], f"{section}.{component_id}")
    problems += unknown_keys(config.get("service"), SCHEMA["service"], "service")
    return problems


@pytest.mark.parametrize(("name", "text"), _variants())
def test_every_key_is_known_to_the_pinned_collector(name: str, text: str) -> None:
    config = yaml.safe_load(text)
    assert config_problems(config) == [], name
    # Every component a pipeline or service.extensions names is defined (connectors count on both ends).
    service = config["service"]
    defined = {section: set(config.get(section) or {}) for section in SECTIONS}
    assert set(service.get("extensions") or []) <= defined["extensions"], name
    for pipeline_name, pipeline in service["pipelines"].items():
        assert set(pipeline.get("processors") or []) <= defined["processors"], (name, pipeline_name)
        assert set(pipeline["receivers"]) <= defined["receivers"] | defined["connectors"], (name, pipeline_name)
        assert set(pipeline["exporters"]) <= defined["exporters"] | defined["connectors"], (name, pipeline_name)


@pytest.mark.parametrize(
    ("path", "typo"),
    [
        (("exporters", "clickhouse", "retry_on_failure"), "max_elapsed_tme"),
        (("extensions", "file_storage/queue"), "fsynk"),
        (("receivers", "otlp", "protocols", "grpc"), "max_recv_msg_size"),
        (("service", "telemetry", "metrics"), "adress"),
    ],
)
def test_a_planted_typo_fails(path: tuple[str, ...], typo: str) -> None:
    """The check is not vacuous: one misspelt key anywhere is reported with its path."""
    config = yaml.safe_load(CONFIGS["collector.yaml"].read_text(encoding="utf-8"))
    node = config
    for key in path:
        node = node[key]
    node[typo] = True
    assert config_problems(config) == [".".join(path) + "." + typo]


def test_deprecated_and_unknown_component_types_fail() -> None:
    config = yaml.safe_load(CONFIGS["collector.yaml"].read_text(encoding="utf-8"))
    config["exporters"]["otlp/jaeger"] = config["exporters"].pop("otlp_grpc/jaeger")
    config["processors"]["batchx"] = {}
    problems = config_problems(config)
    assert "exporters.otlp/jaeger: deprecated type 'otlp'" in problems
    assert "processors.batchx: unknown component type 'batchx'" in problems


def _gateway_exporter(agent: dict[str, Any]) -> dict[str, Any]:
    (exporter,) = [v for k, v in agent["exporters"].items() if k.startswith("otlp_grpc/")]
    return dict(exporter)


def _grpc_receiver(config: dict[str, Any]) -> dict[str, Any]:
    return dict(config["receivers"]["otlp"]["protocols"]["grpc"])


def _token_env(config: dict[str, Any], authenticator: str) -> str:
    assert authenticator.split("/")[0] == "bearertokenauth"
    assert authenticator in config["service"]["extensions"], f"{authenticator} is not started"
    token = config["extensions"][authenticator]["token"]
    match = re.fullmatch(r"\$\{env:([A-Z_][A-Z0-9_]*)\}", token)
    assert match, "the token must come from the environment"
    return match.group(1)


def test_secured_agent_dials_what_the_secured_gateway_accepts() -> None:
    agent = yaml.safe_load(secured(CONFIGS["agent.yaml"].read_text(encoding="utf-8")))
    gateway = yaml.safe_load(secured(CONFIGS["gateway.yaml"].read_text(encoding="utf-8")))
    exporter = _gateway_exporter(agent)
    assert "insecure" not in exporter["tls"] and exporter["tls"]["ca_file"]
    receiver = _grpc_receiver(gateway)
    assert receiver["tls"]["cert_file"] and receiver["tls"]["key_file"]
    assert exporter["endpoint"].rsplit(":", 1)[1] == receiver["endpoint"].rsplit(":", 1)[1]
    agent_env = _token_env(agent, exporter["auth"]["authenticator"])
    gateway_env = _token_env(gateway, receiver["auth"]["authenticator"])
    assert agent_env == gateway_env
    # collector.yaml's secured receivers use the same scheme.
    single = yaml.safe_load(secured(CONFIGS["collector.yaml"].read_text(encoding="utf-8")))
    for protocol in ("grpc", "http"):
        settings = single["receivers"]["otlp"]["protocols"][protocol]
        assert settings["tls"]["cert_file"] and _token_env(single, settings["auth"]["authenticator"]) == agent_env


def test_plain_agent_and_gateway_agree_on_plaintext() -> None:
    """Without the TLS/auth lines the agent dials plaintext and the gateway serves plaintext (they connect)."""
    agent = yaml.safe_load(CONFIGS["agent.yaml"].read_text(encoding="utf-8"))
    gateway = yaml.safe_load(CONFIGS["gateway.yaml"].read_text(encoding="utf-8"))
    assert _gateway_exporter(agent)["tls"] == {"insecure": True}
    assert "auth" not in _gateway_exporter(agent)
    assert "tls" not in _grpc_receiver(gateway) and "auth" not in _grpc_receiver(gateway)


def test_operations_snippet_is_the_agent_exporter() -> None:
    """docs/operations.md shows the agent → gateway exporter exactly as collector-config/agent.yaml has it."""
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if "otlp_grpc/gateway" in b]
    assert len(blocks) == 1, "docs/operations.md must show the agent → gateway exporter once"
    shown = yaml.safe_load(secured(blocks[0]))["exporters"]
    agent = yaml.safe_load(secured(CONFIGS["agent.yaml"].read_text(encoding="utf-8")))
    assert shown == {"otlp_grpc/gateway": agent["exporters"]["otlp_grpc/gateway"]}
    plain_shown = yaml.safe_load(blocks[0])["exporters"]
    plain_agent = yaml.safe_load(CONFIGS["agent.yaml"].read_text(encoding="utf-8"))
    assert plain_shown == {"otlp_grpc/gateway": plain_agent["exporters"]["otlp_grpc/gateway"]}


# ------------------------------------------------------------------------ compose and Grafana provisioning

COMPOSE_SERVICE_KEYS = {
    "image",
    "command",
    "entrypoint",
    "environment",
    "env_file",
    "volumes",
    "ports",
    "depends_on",
    "healthcheck",
    "restart",
    "ulimits",
    "mem_limit",
    "memswap_limit",
    "mem_reservation",
    "cpus",
    "user",
    "configs",
    "secrets",
    "networks",
    "expose",
    "labels",
    "logging",
    "read_only",
    "tmpfs",
    "working_dir",
    "stop_grace_period",
    "deploy",
}


def test_compose_service_keys_are_compose_keys() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    assert set(compose) <= {"name", "services", "volumes", "networks", "configs", "secrets"}
    for name, service in compose["services"].items():
        assert set(service) <= COMPOSE_SERVICE_KEYS, (name, set(service) - COMPOSE_SERVICE_KEYS)
        for dependency in (service.get("depends_on") or {}).values():
            assert set(dependency) <= {"condition", "restart", "required"}, name


def test_grafana_provisioning_keys() -> None:
    datasource_keys = {
        "name",
        "uid",
        "type",
        "access",
        "url",
        "isDefault",
        "editable",
        "jsonData",
        "secureJsonData",
        "orgId",
        "version",
        "basicAuth",
        "database",
        "user",
    }
    folder = ROOT / "dashboards" / "provisioning" / "datasources"
    files = sorted(folder.glob("*.yaml"))
    assert len(files) >= 2, "the ClickHouse and the Prometheus data sources"
    for path in files:
        sources = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert set(sources) <= {"apiVersion", "datasources", "deleteDatasources", "prune"}, path.name
        for source in sources["datasources"]:
            assert set(source) <= datasource_keys, (path.name, set(source) - datasource_keys)
