"""The rules across fields that the OpenAPI schema publishes under `x-srift-rules`, as predicates over request
bodies and query parameters, for the schemathesis harnesses: JSON Schema cannot relate two values, so a
generator that only reads the keywords makes "valid" bodies that break them. Each predicate is written from
its rule's published sentence (not from the server's validator) and says True (kept), False (broken) or None
(the object is not one the rule is about); the harnesses use only the rules the schema publishes, so a rule
the server enforces without publishing it still fails the run as "schema-valid request rejected".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from srift.documents import RULES_KEY
from srift.jobs.spec import DEFAULT_SIZES
from srift.limits import MAX_PS_VMS, PROBE_GRID

Predicate = Callable[[dict[str, Any]], bool | None]
EC2_DEFAULT_MAX_INSTANCES = 8
BANDWIDTH_TOLERANCE = 0.05


def _breakpoints_within_max_batch(obj: dict[str, Any]) -> bool | None:
    curves = [obj.get("forward"), obj.get("backward")]
    if "max_batch" not in obj or not all(isinstance(c, dict) and "batches" in c for c in curves):
        return None
    return all(b <= obj["max_batch"] for c in curves for b in c["batches"])  # type: ignore[index]


def _gradients_within_parameters(obj: dict[str, Any]) -> bool | None:
    structure, layers = obj.get("structure"), obj.get("layers")
    if not isinstance(structure, dict) or not isinstance(layers, list):
        return None
    return sum(layer["grad_bytes"] for layer in layers) <= structure["memory"]["parameter_bytes"]


def _profiles_of_one_model(obj: dict[str, Any]) -> bool | None:
    profiles = obj.get("profiles")
    if not isinstance(profiles, list) or not all(isinstance(p, dict) and "model" in p for p in profiles):
        return None
    return len({p["model"] for p in profiles}) <= 1


def _probe_grid_size(obj: dict[str, Any]) -> bool | None:
    if "node_counts" not in obj or "provider" not in obj:
        return None
    sizes = obj.get("sizes") or DEFAULT_SIZES
    return len(set(sizes)) * len(set(obj["node_counts"])) <= PROBE_GRID.maximum


def _ec2_instances_within_cap(obj: dict[str, Any]) -> bool | None:
    ec2 = obj.get("ec2")
    if obj.get("provider") != "ec2" or not isinstance(ec2, dict):
        return None
    if "node_counts" in obj:
        instances = max(obj["node_counts"])
    else:
        names = obj.get("instance_types") or [obj.get("instance_type")]
        instances = len(set(names))
    return instances <= ec2.get("max_instances", EC2_DEFAULT_MAX_INSTANCES)


def _probe_sample(obj: dict[str, Any]) -> bool:
    return {"world_size", "time_s", "buffer_bytes"} <= set(obj)


def _world_size_is_nodes_times_ranks(obj: dict[str, Any]) -> bool | None:
    if not _probe_sample(obj):
        return None
    world = obj["world_size"]
    nodes = obj.get("nodes") if obj.get("nodes") is not None else world
    per_node = obj.get("ranks_per_node") if obj.get("ranks_per_node") is not None else max(1, world // nodes)
    return bool(nodes * per_node == world)


def _bandwidths_agree_with_time(obj: dict[str, Any]) -> bool | None:
    if not _probe_sample(obj):
        return None
    n = obj["world_size"]
    algbw = 8 * obj["buffer_bytes"] / obj["time_s"] / 1e9
    factor = 2 * (n - 1) / n if obj.get("collective", "allreduce") == "allreduce" else (n - 1) / n
    expected = {"algbw_gbps": algbw, "busbw_gbps": algbw * factor}
    return all(
        abs(obj[name] - value) <= BANDWIDTH_TOLERANCE * value + 1e-3
        for name, value in expected.items()
        if obj.get(name) is not None
    )


def _choices(obj: dict[str, Any]) -> list[dict[str, Any]] | None:
    choices = obj.get("choices")
    if not isinstance(choices, list) or not all(
        isinstance(c, dict) and "instance_type" in c for c in choices
    ):
        return None
    return choices


def _choices_distinct(obj: dict[str, Any]) -> bool | None:
    choices = _choices(obj)
    if choices is None:
        return None
    keys = [(c["instance_type"], c.get("market", "on_demand")) for c in choices]
    return len(set(keys)) == len(keys)


def _one_gpus_per_type(obj: dict[str, Any]) -> bool | None:
    choices = _choices(obj)
    if choices is None:
        return None
    gpus: dict[str, set[int | None]] = {}
    for c in choices:
        gpus.setdefault(c["instance_type"], set()).add(c.get("gpus"))
    return all(len(values) == 1 for values in gpus.values())


def _parameter_server_fleet_size(obj: dict[str, Any]) -> bool | None:
    if obj.get("comm") != "parameter_server":
        return None
    fleets = [obj["config"]] if isinstance(obj.get("config"), dict) else list(obj.get("configs") or [])
    return all(sum(c["count"] for c in fleet["choices"]) <= MAX_PS_VMS for fleet in fleets)


def _prediction_request(obj: dict[str, Any]) -> bool:
    """Whether `obj` is a prediction request (a fleet under config or configs), not a plan request."""
    return "config" in obj or "configs" in obj


def _checkpointing_needs_strategy(obj: dict[str, Any]) -> bool | None:
    if not _prediction_request(obj) or obj.get("checkpointing") is None:
        return None
    return obj.get("strategy") is not None


def _strategy_as_planned(obj: dict[str, Any]) -> bool | None:
    """The part a body shows: a strategy with mc_samples above 0 or comm parameter_server is ddp or auto with
    checkpointing not true. Whether a setup fits is the stored data's (a 409), not the body's."""
    strategy = obj.get("strategy")
    if not _prediction_request(obj) or strategy is None:
        return None
    if obj.get("comm", "allreduce") == "allreduce" and obj.get("mc_samples", 0) == 0:
        return None
    return strategy in ("ddp", "auto") and obj.get("checkpointing") is not True


def _recent_market(obj: dict[str, Any]) -> dict[str, Any] | None:
    """A plan request's recent market, or None where the object is not a request that names one."""
    market = obj.get("recent_market")
    return market if isinstance(market, dict) else None


def _one_recent_source(obj: dict[str, Any]) -> bool | None:
    market = _recent_market(obj)
    if market is None:
        return None
    return sum(market.get(key) is not None for key in ("trace", "log_csv")) == 1


def _recent_market_needs_spot_pricing_and_fallback(obj: dict[str, Any]) -> bool | None:
    if _recent_market(obj) is None:
        return None
    return (
        obj.get("market", "any") in ("spot", "any")
        and obj.get("price_interruptions", True) is True
        and obj.get("fallback", True) is True
    )


def _recent_market_covers_the_fleet(obj: dict[str, Any]) -> bool | None:
    """The harness's server holds no imported trace (nothing runs `srift traces import` there), so no named
    trace is in its trace set; and a generated `log_csv` is not the CSV `srift traces import` reads (a
    header time,zone,instance_type,event,count and rows of a catalog type), so it covers no fleet."""
    return None if _recent_market(obj) is None else False


_TRAIN_REQUEST_KEYS = {"providers", "instance_types", "backends", "activate", "seed", "tune"}
"""The fields of POST /v1/bandwidth-models' body (srift.api.schemas.bandwidth.TrainRequest)."""


_CURVES_QUERY_KEYS = {"provider", "instance_type", "world_size"}
"""The query parameters of GET /v1/bandwidth-models/{version}/curves (srift.api.routes.bandwidth_curves)."""


def _ring_names(obj: dict[str, Any]) -> list[str] | None:
    """The ring names an object gives, where a schema publishes ring-types-once: a bandwidth-model training
    request's `instance_types` entries, a probe sample's or the curves query's `instance_type`; None when it
    is none of those."""
    names = obj.get("instance_types")
    if isinstance(names, list) and set(obj) <= _TRAIN_REQUEST_KEYS:
        return [name for name in names if isinstance(name, str)]
    name = obj.get("instance_type")
    if isinstance(name, str) and (_probe_sample(obj) or set(obj) <= _CURVES_QUERY_KEYS):
        return [name]
    return None


def _ring_types_once(obj: dict[str, Any]) -> bool | None:
    """A mixed ring's name (types joined by '+') names each type once, blanks around a type ignored."""
    names = _ring_names(obj)
    if names is None:
        return None
    rings = [[member.strip() for member in name.split("+")] for name in names if "+" in name]
    return all(len(set(members)) == len(members) for members in rings)


RULES: dict[str, Predicate] = {
    "choices-distinct": _choices_distinct,
    "one-gpus-per-type": _one_gpus_per_type,
    "parameter-server-fleet-size": _parameter_server_fleet_size,
    "checkpointing-needs-strategy": _checkpointing_needs_strategy,
    "strategy-as-planned": _strategy_as_planned,
    "breakpoints-within-max-batch": _breakpoints_within_max_batch,
    "gradients-within-parameters": _gradients_within_parameters,
    "profiles-of-one-model": _profiles_of_one_model,
    "probe-grid-size": _probe_grid_size,
    "ec2-instances-within-cap": _ec2_instances_within_cap,
    "world-size-is-nodes-times-ranks": _world_size_is_nodes_times_ranks,
    "bandwidths-agree-with-time": _bandwidths_agree_with_time,
    "one-recent-source": _one_recent_source,
    "recent-market-needs-spot-pricing-and-fallback": _recent_market_needs_spot_pricing_and_fallback,
    "recent-market-covers-the-fleet": _recent_market_covers_the_fleet,
    "ring-types-once": _ring_types_once,
}


def published_rules(schema: Any) -> set[str]:
    """The ids of every rule the OpenAPI document `schema` lists under x-srift-rules, anywhere in it."""
    found: set[str] = set()
    if isinstance(schema, dict):
        found.update(rule["id"] for rule in schema.get(RULES_KEY, ()))
        for value in schema.values():
            found |= published_rules(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= published_rules(value)
    return found


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for inner in value.values():
            yield from _objects(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _objects(inner)


def broken_rule(body: Any, rules: set[str]) -> str | None:
    """The id of the first of `rules` that an object in `body` breaks, or None."""
    for obj in _objects(body):
        for rule in sorted(rules):
            if RULES[rule](obj) is False:
                return rule
    return None
