"""Fixtures for job tests: catalog contents (testbed types, shipped AWS types) and a worker's settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from srift.catalog.shipped import load_shipped_catalog
from srift.db.session import session_factory
from srift.settings import Settings
from srift.testbed import example_spec_path, load_spec
from srift.testbed.catalog import register_types

EC2_OPTIONS = {"image_id": "ami-12c6146b", "results_url": "http://10.0.0.5:8000", "region": "us-east-1"}


@pytest.fixture
def ec2_options() -> dict[str, object]:
    """Launch options of an EC2 job (moto knows this AMI id)."""
    return dict(EC2_OPTIONS)


def register_testbed_types(url: str) -> None:
    session: Session = session_factory(url)()
    try:
        register_types(session=session, spec=load_spec(example_spec_path(), cores=64))
        session.commit()
    finally:
        session.close()


@pytest.fixture
def testbed_types(db_url: str) -> None:
    """tb.small and tb.large of the shipped example spec, under provider testbed."""
    register_testbed_types(db_url)


@pytest.fixture
def aws_catalog(settings: Settings) -> None:
    load_shipped_catalog(settings)


@pytest.fixture
def worker_settings(sqlite_url: str, tmp_path: Path) -> Settings:
    return Settings(database_url=sqlite_url, data_dir=tmp_path / "data", models_dir=tmp_path / "models")
