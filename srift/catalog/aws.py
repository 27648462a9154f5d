"""`srift catalog refresh --provider aws`: fetch current EC2 instance types and prices into a new snapshot.

Three AWS APIs, credentials from boto3's standard chain (environment, profile, instance role):
EC2 DescribeInstanceTypes (GPUs, vCPUs, memory, network, EFA) in the region; EC2 DescribeSpotPriceHistory
(Linux/UNIX; the latest price of each availability zone, then the minimum over zones); and the Pricing API
GetProducts (Linux, shared tenancy, on-demand) through its us-east-1 endpoint. DescribeInstanceTypes does not
describe intra-node GPU links, so the interconnect comes from a table by GPU model (with the few known
exceptions by type). Throttling and capacity errors are retried with exponential backoff, then reported as
ExternalServiceError. If the Pricing API fails (it needs its own IAM permission, pricing:GetProducts) the
snapshot keeps its spot prices and the report says on-demand prices were not refreshed; the store then
keeps using the earlier on-demand prices.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from srift.catalog.document import PriceData, SnapshotData, TypeData
from srift.catalog.store import save_snapshot
from srift.domain.catalog import InstanceType, Interconnect, Market
from srift.errors import EnvironmentProblem, ExternalServiceError, InvalidInput

DEFAULT_FAMILIES: tuple[str, ...] = (
    "g4dn",
    "g5",
    "g6",
    "g6e",
    "p3",
    "p3dn",
    "p4d",
    "p4de",
    "p5",
    "p5en",
    "g3",
    "p2",
    "c5",
)
REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
PRICING_ENDPOINT_REGION = "us-east-1"
RETRYABLE = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestThrottled",
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "ServiceUnavailable",
        "Unavailable",
        "InternalError",
        "InternalFailure",
    }
)

# Per-GPU one-direction intra-node bandwidth, gigabits/s, for multi-GPU types (see aws.yaml's header).
INTERCONNECT_BY_GPU: dict[str, tuple[Interconnect, float]] = {
    "V100": (Interconnect.NVLINK, 1200.0),
    "A100": (Interconnect.NVSWITCH, 2400.0),
    "H100": (Interconnect.NVSWITCH, 3600.0),
    "H200": (Interconnect.NVSWITCH, 3600.0),
    "B200": (Interconnect.NVSWITCH, 7200.0),
    "T4": (Interconnect.PCIE, 126.0),
    "M60": (Interconnect.PCIE, 126.0),
    "K80": (Interconnect.PCIE, 63.0),
    "A10G": (Interconnect.PCIE, 252.0),
    "L4": (Interconnect.PCIE, 252.0),
    "L40S": (Interconnect.PCIE, 252.0),
}
INTERCONNECT_BY_TYPE: dict[str, tuple[Interconnect, float]] = {"p3.8xlarge": (Interconnect.NVLINK, 800.0)}
DEFAULT_MULTI_GPU_LINK = (Interconnect.PCIE, 252.0)

# AWS's named network ratings of older types (no Gbps figure published): assumed burst ceilings.
NAMED_NETWORK_GBPS = {"very low": 0.1, "low": 0.3, "low to moderate": 0.5, "moderate": 1.0, "high": 10.0}

SPOT_SOURCE = (
    "AWS EC2 DescribeSpotPriceHistory (Linux/UNIX): minimum over {zones} availability zone(s) "
    "of each zone's latest price"
)
ON_DEMAND_SOURCE = (
    "AWS Pricing API GetProducts (AmazonEC2, Linux, shared tenancy, on-demand, regionCode {region})"
)


@dataclass(frozen=True, slots=True)
class RefreshReport:
    """What a refresh stored, and what it could not fetch."""

    snapshot_id: int
    snapshot: str
    region: str
    types: int
    spot_prices: int
    on_demand_prices: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def refresh(
    *,
    session: Session,
    region: str,
    families: Sequence[str] = DEFAULT_FAMILIES,
    ec2: Any = None,
    pricing: Any = None,
    now: datetime | None = None,
    sleep: Callable[[float], None] = time.sleep,
    attempts: int = 5,
) -> RefreshReport:
    """Fetch instance types, spot and on-demand prices for `families` in `region`; save a new snapshot.

    `ec2` and `pricing` are boto3 clients (made from the default credential chain when None). The
    snapshot is named aws-<region>-<UTC timestamp> and is active, so it takes precedence over older data
    for the prices it holds. Writes happen in the caller's session.
    """
    if not REGION_RE.match(region):
        raise InvalidInput(
            f"{region!r} is not an AWS region name", hint="e.g. us-east-1 or eu-west-2", field="region"
        )
    if not families:
        raise InvalidInput(
            "no instance families given", hint="name at least one family, e.g. g5", field="families"
        )
    now = now or datetime.now(UTC)
    ec2 = ec2 if ec2 is not None else _client("ec2", region)
    call = _Caller(sleep=sleep, attempts=attempts)
    notes: list[str] = []

    types = _instance_types(ec2, call, set(families))
    if not types:
        raise ExternalServiceError(
            f"DescribeInstanceTypes in {region} returned none of the families {', '.join(families)}",
            hint="check the region offers them, or pass other families",
        )
    names = sorted(types)
    spot, zones = _spot_prices(ec2, call, names, now)
    missing_spot = [n for n in names if n not in spot]
    if missing_spot:
        notes.append(f"no spot price in {region} for: {', '.join(missing_spot)}")

    on_demand: dict[str, float] = {}
    try:
        pricing = pricing if pricing is not None else _client("pricing", PRICING_ENDPOINT_REGION)
        on_demand = _on_demand_prices(pricing, call, region, set(names))
    except (ExternalServiceError, EnvironmentProblem) as exc:
        notes.append(
            f"on-demand prices not refreshed ({exc.detail}); earlier on-demand prices stay in effect"
        )
    else:
        missing_od = [n for n in names if n not in on_demand]
        if missing_od:
            notes.append(f"no on-demand price in {region} for: {', '.join(missing_od)}")

    as_of = now.date()
    prices = [
        PriceData(n, region, Market.SPOT, spot[n], SPOT_SOURCE.format(zones=zones[n]), as_of)
        for n in names
        if n in spot
    ]
    od_source = ON_DEMAND_SOURCE.format(region=region)
    prices += [
        PriceData(n, region, Market.ON_DEMAND, on_demand[n], od_source, as_of)
        for n in names
        if n in on_demand
    ]
    name = f"aws-{region}-{now.strftime('%Y%m%dT%H%M%SZ')}"
    data = SnapshotData(
        name=name,
        provider="aws",
        source=f"AWS API refresh of {region} at {now.strftime('%Y-%m-%d %H:%M:%SZ')} (DescribeInstanceTypes, "
        f"DescribeSpotPriceHistory, Pricing GetProducts); families {', '.join(families)}",
        as_of=as_of,
        active=True,
        types=tuple(types[n] for n in names),
        prices=tuple(prices),
    )
    snapshot_id = save_snapshot(session=session, snapshot=data, replace=True)
    return RefreshReport(
        snapshot_id=snapshot_id,
        snapshot=name,
        region=region,
        types=len(names),
        spot_prices=sum(1 for p in prices if p.market is Market.SPOT),
        on_demand_prices=sum(1 for p in prices if p.market is Market.ON_DEMAND),
        notes=tuple(notes),
    )


def _client(service: str, region: str) -> Any:
    import boto3

    return boto3.client(service, region_name=region)


class _Caller:
    """Calls an AWS API, retrying throttling and capacity errors with exponential backoff."""

    def __init__(self, *, sleep: Callable[[float], None], attempts: int) -> None:
        self.sleep = sleep
        self.attempts = max(1, attempts)

    def __call__(self, what: str, fn: Callable[..., dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionError,
            NoCredentialsError,
            NoRegionError,
        )

        last = ""
        for attempt in range(self.attempts):
            try:
                return fn(**kwargs)
            except NoCredentialsError as exc:
                raise EnvironmentProblem(
                    f"no AWS credentials for {what}",
                    hint="configure them: aws configure, AWS_PROFILE, AWS_ACCESS_KEY_ID, or an instance role",
                ) from exc
            except NoRegionError as exc:
                raise EnvironmentProblem(f"no AWS region for {what}", hint="pass --region") from exc
            except ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                message = str(exc.response.get("Error", {}).get("Message", ""))
                if code not in RETRYABLE:
                    raise ExternalServiceError(
                        f"{what} failed: {code}: {message}",
                        hint="check the region name and the IAM permissions ec2:DescribeInstanceTypes, "
                        "ec2:DescribeSpotPriceHistory and pricing:GetProducts",
                    ) from exc
                last = f"{code}: {message}"
            except ConnectionError as exc:
                last = f"connection error: {exc}"
            except BotoCoreError as exc:
                raise ExternalServiceError(
                    f"{what} failed: {exc}", hint="check the AWS configuration"
                ) from exc
            if attempt + 1 < self.attempts:
                self.sleep(min(0.5 * 2**attempt, 8.0))
        raise ExternalServiceError(
            f"{what} failed after {self.attempts} attempts ({last})",
            hint="AWS is throttling or out of capacity; wait a minute and run the refresh again",
        )


def _pages(
    call: _Caller, what: str, fn: Callable[..., dict[str, Any]], **kwargs: Any
) -> Iterator[dict[str, Any]]:
    token: str | None = None
    while True:
        args = dict(kwargs, NextToken=token) if token else dict(kwargs)
        page = call(what, fn, **args)
        yield page
        token = page.get("NextToken")
        if not token:
            return


def _instance_types(ec2: Any, call: _Caller, families: set[str]) -> dict[str, TypeData]:
    out: dict[str, TypeData] = {}
    wanted = [{"Name": "instance-type", "Values": [f"{family}.*" for family in sorted(families)]}]
    pages = _pages(
        call, "EC2 DescribeInstanceTypes", ec2.describe_instance_types, Filters=wanted, MaxResults=100
    )
    for page in pages:
        for info in page.get("InstanceTypes", []):
            name = str(info.get("InstanceType", ""))
            if name.split(".")[0] in families:
                out[name] = type_from_description(info)
    return out


def type_from_description(info: dict[str, Any]) -> TypeData:
    """Build our InstanceType from one DescribeInstanceTypes record."""
    name = str(info["InstanceType"])
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    gpu_model: str | None = None
    gpu_count = 0
    gpu_memory_gib = 0.0
    if gpus:
        first = gpus[0]
        gpu_model = str(first.get("Name") or "GPU")
        gpu_count = sum(int(g.get("Count", 0)) for g in gpus)
        gpu_memory_gib = round(float((first.get("MemoryInfo") or {}).get("SizeInMiB", 0)) / 1024, 2)
    network = info.get("NetworkInfo") or {}
    network_gbps, burst, baseline = _network(network)
    if gpu_count > 1:
        interconnect, link_gbps = INTERCONNECT_BY_TYPE.get(
            name, INTERCONNECT_BY_GPU.get(gpu_model or "", DEFAULT_MULTI_GPU_LINK)
        )
    else:
        interconnect, link_gbps = Interconnect.NONE, 0.0
    extra: dict[str, Any] = {"network_performance": str(network.get("NetworkPerformance", ""))}
    if baseline is not None:
        extra["network_baseline_gbps"] = baseline
    instance = InstanceType(
        provider="aws",
        name=name,
        gpu_model=gpu_model,
        gpu_count=gpu_count,
        gpu_memory_gib=gpu_memory_gib,
        vcpus=int((info.get("VCpuInfo") or {}).get("DefaultVCpus", 1)),
        memory_gib=round(float((info.get("MemoryInfo") or {}).get("SizeInMiB", 0)) / 1024, 3),
        network_gbps=network_gbps,
        network_burst=burst,
        interconnect=interconnect,
        interconnect_gbps=link_gbps,
        efa=bool(network.get("EfaSupported", False)),
    )
    return TypeData(instance=instance, extra=extra)


def _network(network: dict[str, Any]) -> tuple[float, bool, float | None]:
    """(rated Gbps, whether it is an "up to" burst ceiling, sustained baseline Gbps when known)."""
    cards = network.get("NetworkCards") or []
    peaks = [float(c["PeakBandwidthInGbps"]) for c in cards if c.get("PeakBandwidthInGbps")]
    if peaks and len(peaks) == len(cards):
        baselines = [float(c.get("BaselineBandwidthInGbps") or p) for c, p in zip(cards, peaks, strict=True)]
        peak, base = sum(peaks), sum(baselines)
        return peak, base < peak, base
    return parse_network_performance(str(network.get("NetworkPerformance", "")))


def parse_network_performance(text: str) -> tuple[float, bool, float | None]:
    """Parse EC2's NetworkPerformance text ("Up to 25 Gigabit", "4x 100 Gigabit", "High")."""
    lowered = text.strip().lower()
    match = re.search(r"(?:(\d+)\s*x\s*)?(\d+(?:\.\d+)?)\s*gigabit", lowered)
    if match:
        cards = int(match.group(1) or 1)
        gbps = cards * float(match.group(2))
        burst = lowered.startswith("up to")
        return gbps, burst, None if burst else gbps
    if lowered in NAMED_NETWORK_GBPS:
        return NAMED_NETWORK_GBPS[lowered], True, None
    return 1.0, True, None


def _spot_prices(
    ec2: Any, call: _Caller, names: Sequence[str], now: datetime
) -> tuple[dict[str, float], dict[str, int]]:
    """Per type: the minimum over zones of each zone's latest Linux/UNIX spot price, and the zone count."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for batch in _chunks(names, 50):
        pages = _pages(
            call,
            "EC2 DescribeSpotPriceHistory",
            ec2.describe_spot_price_history,
            InstanceTypes=list(batch),
            ProductDescriptions=["Linux/UNIX"],
            StartTime=now,
            MaxResults=1000,
        )
        for page in pages:
            for item in page.get("SpotPriceHistory", []):
                try:
                    price = float(item["SpotPrice"])
                except (KeyError, TypeError, ValueError):
                    continue
                if price <= 0:
                    continue
                key = (str(item.get("InstanceType")), str(item.get("AvailabilityZone")))
                stamp = item.get("Timestamp")
                when = stamp if isinstance(stamp, datetime) else datetime.min.replace(tzinfo=UTC)
                if when.tzinfo is None:
                    when = when.replace(tzinfo=UTC)
                held = latest.get(key)
                if held is None or when > held[0]:
                    latest[key] = (when, price)
    best: dict[str, float] = {}
    zones: dict[str, int] = {}
    for (name, _zone), (_when, price) in latest.items():
        best[name] = min(price, best.get(name, price))
        zones[name] = zones.get(name, 0) + 1
    return best, zones


def _on_demand_prices(pricing: Any, call: _Caller, region: str, names: set[str]) -> dict[str, float]:
    filters = [
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
        {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
        {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
        {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
        {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
    ]
    out: dict[str, float] = {}
    pages = _pages(
        call,
        "Pricing GetProducts",
        pricing.get_products,
        ServiceCode="AmazonEC2",
        Filters=filters,
        FormatVersion="aws_v1",
        MaxResults=100,
    )
    for page in pages:
        for raw in page.get("PriceList", []):
            parsed = parse_price_list_item(raw)
            if parsed is None:
                continue
            name, price = parsed
            if name in names:
                out[name] = min(price, out.get(name, price))
    return out


def parse_price_list_item(raw: str | dict[str, Any]) -> tuple[str, float] | None:
    """(instance type, USD per hour) from one Pricing API PriceList entry; None without an hourly price."""
    try:
        item = json.loads(raw) if isinstance(raw, str) else raw
        name = str(item["product"]["attributes"]["instanceType"])
        terms = item.get("terms", {}).get("OnDemand", {})
    except (KeyError, TypeError, ValueError):
        return None
    prices: list[float] = []
    for term in terms.values():
        for dimension in (term.get("priceDimensions") or {}).values():
            if str(dimension.get("unit", "")).lower() not in {"hrs", "hours", "hour"}:
                continue
            try:
                usd = float(dimension["pricePerUnit"]["USD"])
            except (KeyError, TypeError, ValueError):
                continue
            if usd > 0:
                prices.append(usd)
    return (name, min(prices)) if prices else None


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
