"""AWS refresh against moto (EC2) and botocore's Stubber (Pricing API, scripted spot histories, throttling).

Moto serves real DescribeInstanceTypes records but has no Pricing API and answers every spot query with a
placeholder price, so those calls are scripted with realistic payloads through botocore's Stubber.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import moto
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from srift.catalog import aws, store
from srift.catalog.shipped import load_shipped_catalog
from srift.db.session import session_factory, transaction
from srift.domain.catalog import Interconnect, Market
from srift.errors import ExternalServiceError, InvalidInput
from srift.settings import Settings

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
with gzip.open(Path(moto.__file__).parent / "ec2/resources/instance_types.json.gz") as _fh:
    MOTO_TYPES = json.loads(_fh.read())


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield


def product(instance_type: str, usd: str, region: str = "us-west-2") -> str:
    """A Pricing API PriceList entry shaped like AWS's (JSON text)."""
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {
                    "instanceType": instance_type,
                    "regionCode": region,
                    "operatingSystem": "Linux",
                },
                "sku": f"SKU{instance_type}",
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    f"SKU{instance_type}.JRTCKXETXF": {
                        "priceDimensions": {
                            f"SKU{instance_type}.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": usd},
                                "description": f"${usd} per On Demand Linux {instance_type} Instance Hour",
                            }
                        },
                        "termAttributes": {},
                    }
                }
            },
        }
    )


def _pricing_filters(region: str) -> list[dict[str, str]]:
    return [
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
        {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
        {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
        {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
        {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
    ]


def test_refresh_with_moto_writes_a_snapshot_that_overrides_only_what_it_fetched(
    aws_env: None, settings: Settings
) -> None:
    load_shipped_catalog(settings)
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-west-2")
        pricing = boto3.client("pricing", region_name="us-east-1")
        stub = Stubber(pricing)
        base = {
            "ServiceCode": "AmazonEC2",
            "Filters": _pricing_filters("us-west-2"),
            "FormatVersion": "aws_v1",
            "MaxResults": 100,
        }
        stub.add_response(
            "get_products",
            {
                "FormatVersion": "aws_v1",
                "PriceList": [product("g5.xlarge", "0.9900000000"), product("m5.large", "0.096")],
                "NextToken": "page2",
            },
            base,
        )
        stub.add_response(
            "get_products",
            {"FormatVersion": "aws_v1", "PriceList": [product("p4d.24xlarge", "21.9576000000")]},
            dict(base, NextToken="page2"),
        )
        with stub, transaction(settings.resolved_database_url) as session:
            report = aws.refresh(
                session=session,
                region="us-west-2",
                families=("g4dn", "g5", "p4d"),
                ec2=ec2,
                pricing=pricing,
                now=NOW,
            )
        stub.assert_no_pending_responses()

    assert report.snapshot == "aws-us-west-2-20261122T120000Z" and report.types == 16
    assert report.on_demand_prices == 2 and report.spot_prices > 0
    assert any("no on-demand price" in n and "g4dn.xlarge" in n for n in report.notes)
    with session_factory(settings.resolved_database_url)() as s:
        spec = store.get_instance_type(session=s, provider="aws", name="p4d.24xlarge")
        assert (spec.gpu_model, spec.gpu_count, spec.gpu_memory_gib) == ("A100", 8, 40.0)
        assert spec.network_gbps == 400 and spec.efa and spec.interconnect is Interconnect.NVSWITCH
        small = store.get_instance_type(session=s, provider="aws", name="g4dn.xlarge")
        assert small.network_burst and small.network_gbps == 25 and small.interconnect is Interconnect.NONE
        four = store.get_instance_type(session=s, provider="aws", name="g4dn.12xlarge")
        assert four.interconnect is Interconnect.PCIE and four.interconnect_gbps == 126

        west = {
            (o.instance.name, o.market): o
            for o in store.get_offers(session=s, provider="aws", region="us-west-2")
        }
        fresh = west[("p4d.24xlarge", Market.ON_DEMAND)]
        assert (
            fresh.price_usd_per_hr == pytest.approx(21.9576)
            and "Pricing API" in fresh.source
            and fresh.as_of == NOW.date()
        )
        kept = west[("g4dn.xlarge", Market.ON_DEMAND)]
        assert kept.price_usd_per_hr == 0.526 and "SkyPilot" in kept.source
        assert "DescribeSpotPriceHistory" in west[("g5.xlarge", Market.SPOT)].source
        assert west[("c5.large", Market.SPOT)].price_usd_per_hr == pytest.approx(0.0277)
        east = {
            (o.instance.name, o.market): o
            for o in store.get_offers(session=s, provider="aws", region="us-east-1")
        }
        assert east[("p4d.24xlarge", Market.ON_DEMAND)].price_usd_per_hr == pytest.approx(32.7726)


def _stubbed_ec2(records: list[dict[str, Any]], spot: list[dict[str, Any]]) -> tuple[Any, Stubber]:
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(ec2)
    wanted = [
        {"Name": "instance-type", "Values": sorted(f"{r['InstanceType'].split('.')[0]}.*" for r in records)}
    ]
    stub.add_response(
        "describe_instance_types", {"InstanceTypes": records}, {"Filters": wanted, "MaxResults": 100}
    )
    stub.add_response(
        "describe_spot_price_history",
        {"SpotPriceHistory": spot},
        {
            "InstanceTypes": sorted(r["InstanceType"] for r in records),
            "ProductDescriptions": ["Linux/UNIX"],
            "StartTime": NOW,
            "MaxResults": 1000,
        },
    )
    return ec2, stub


def _spot(instance_type: str, zone: str, usd: str, age_h: float) -> dict[str, Any]:
    return {
        "InstanceType": instance_type,
        "AvailabilityZone": zone,
        "SpotPrice": usd,
        "ProductDescription": "Linux/UNIX",
        "Timestamp": NOW - timedelta(hours=age_h),
    }


def test_spot_is_min_over_zones_of_each_zones_latest_price_and_pricing_failure_is_a_note(
    sqlite_url: str,
) -> None:
    records = [MOTO_TYPES["p5.48xlarge"], MOTO_TYPES["g6.xlarge"]]
    history = [
        _spot("p5.48xlarge", "us-east-1a", "20.0", 5),  # older and cheaper: superseded
        _spot("p5.48xlarge", "us-east-1a", "31.0", 1),
        _spot("p5.48xlarge", "us-east-1b", "28.5", 2),
        _spot("g6.xlarge", "us-east-1c", "0.39", 1),
    ]
    ec2, ec2_stub = _stubbed_ec2(records, history)
    pricing = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )
    pricing_stub = Stubber(pricing)
    for _ in range(3):
        pricing_stub.add_client_error(
            "get_products", service_error_code="ThrottlingException", service_message="Rate exceeded"
        )
    slept: list[float] = []
    with ec2_stub, pricing_stub, transaction(sqlite_url) as session:
        report = aws.refresh(
            session=session,
            region="us-east-1",
            families=("p5", "g6"),
            ec2=ec2,
            pricing=pricing,
            now=NOW,
            sleep=slept.append,
            attempts=3,
        )
    assert slept == [0.5, 1.0]
    assert report.on_demand_prices == 0 and report.spot_prices == 2
    assert any("on-demand prices not refreshed" in n and "ThrottlingException" in n for n in report.notes)
    with session_factory(sqlite_url)() as s:
        offers = {o.instance.name: o for o in store.get_offers(session=s, provider="aws", region="us-east-1")}
    assert (
        offers["p5.48xlarge"].price_usd_per_hr == 28.5
        and "2 availability zone" in offers["p5.48xlarge"].source
    )
    assert (
        offers["p5.48xlarge"].instance.network_gbps == 3200
        and offers["p5.48xlarge"].instance.interconnect_gbps == 3600
    )
    assert offers["g6.xlarge"].price_usd_per_hr == 0.39


def test_throttled_ec2_is_retried_with_backoff_then_reported(sqlite_url: str) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(ec2)
    for _ in range(4):
        stub.add_client_error(
            "describe_instance_types", service_error_code="RequestLimitExceeded", service_message="slow down"
        )
    slept: list[float] = []
    with stub, pytest.raises(ExternalServiceError) as info, transaction(sqlite_url) as session:
        aws.refresh(
            session=session,
            region="us-east-1",
            ec2=ec2,
            pricing=object(),
            now=NOW,
            sleep=slept.append,
            attempts=4,
        )
    assert (
        slept == [0.5, 1.0, 2.0]
        and "after 4 attempts" in info.value.detail
        and "RequestLimitExceeded" in info.value.detail
    )

    denied = Stubber(ec2)
    denied.add_client_error(
        "describe_instance_types", service_error_code="UnauthorizedOperation", service_message="no"
    )
    with denied, pytest.raises(ExternalServiceError) as info, transaction(sqlite_url) as session:
        aws.refresh(
            session=session, region="us-east-1", ec2=ec2, pricing=object(), now=NOW, sleep=slept.append
        )
    assert "ec2:DescribeInstanceTypes" in info.value.hint and len(slept) == 3

    with pytest.raises(InvalidInput), transaction(sqlite_url) as session:
        aws.refresh(session=session, region="us_east", ec2=ec2, pricing=object())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Up to 25 Gigabit", (25.0, True, None)),
        ("4x 100 Gigabit", (400.0, False, 400.0)),
        ("3200 Gigabit", (3200.0, False, 3200.0)),
        ("High", (10.0, True, None)),
    ],
)
def test_network_performance_text(text: str, expected: tuple[float, bool, float | None]) -> None:
    assert aws.parse_network_performance(text) == expected


def test_price_list_item_ignores_zero_and_non_hourly_dimensions() -> None:
    item = json.loads(product("g5.xlarge", "1.006"))
    dims = next(iter(item["terms"]["OnDemand"].values()))["priceDimensions"]
    dims["zero"] = {"unit": "Hrs", "pricePerUnit": {"USD": "0.0000000000"}}
    dims["upfront"] = {"unit": "Quantity", "pricePerUnit": {"USD": "0.5"}}
    assert aws.parse_price_list_item(json.dumps(item)) == ("g5.xlarge", 1.006)
    assert aws.parse_price_list_item("{not json") is None
