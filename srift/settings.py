"""Service settings from SRIFT_* environment variables, validated once at start-up."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from srift.errors import ConfigurationError
from srift.limits import DEFAULT_MAX_SOLVE_BUDGET_S, MAX_SOLVE_BUDGET_S

REPO_ROOT = Path(__file__).resolve().parent.parent


def is_checkout(root: Path = REPO_ROOT) -> bool:
    """True when `root` is a Srift source checkout (its pyproject names the project srift), not the
    site-packages folder an installed package lives in."""
    pyproject = root / "pyproject.toml"
    try:
        text = pyproject.read_text() if pyproject.is_file() else ""
    except OSError:
        return False
    return 'name = "srift"' in text and (root / "srift" / "__init__.py").is_file()


def _default_data_dir() -> Path:
    """`./var` of a source checkout (what `make run` uses), else the user's data folder (platformdirs:
    ~/.local/share/srift on Linux, ~/Library/Application Support/srift on macOS), never the package's."""
    if is_checkout():
        return REPO_ROOT / "var"
    import platformdirs

    return Path(platformdirs.user_data_dir("srift", appauthor=False))


class Settings(BaseSettings):
    """Every knob of the service; each field is read from SRIFT_<NAME>."""

    model_config = SettingsConfigDict(env_prefix="SRIFT_", extra="ignore")

    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="where the embedded SQLite file and job/testbed state live: ./var in a source checkout, "
        "else the user's data folder (platformdirs)",
    )
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; default sqlite:///<data_dir>/srift.db"
    )
    models_dir: Path = Field(
        default_factory=Path, description="trained bandwidth-model artifacts; default <data_dir>/models"
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    workers: int = Field(
        default=0, ge=0, le=256, description="`srift serve` worker processes; 0: one per usable CPU"
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    read_requires_token: bool = Field(default=False, description="require a read token for GET endpoints")
    auth_enabled: bool = Field(default=True, description="require tokens for writes")
    cors_origins: list[str] = Field(
        default_factory=list, description="allowed CORS origins; closed by default"
    )
    max_body_bytes: int = Field(default=2_000_000, ge=1024)
    cache_max_age_s: int = Field(
        default=0,
        ge=0,
        le=86_400,
        description="Cache-Control max-age of read answers; 0: clients revalidate every time (ETag, 304)",
    )
    max_solve_budget_s: float = Field(
        default=DEFAULT_MAX_SOLVE_BUDGET_S,
        gt=0,
        le=MAX_SOLVE_BUDGET_S,
        description="the most seconds a plan request's solve_budget_s may ask for (the schema states it)",
    )
    default_region: str = "us-east-1"

    @field_validator("database_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("sqlite", "postgresql")):
            raise ValueError(
                "must start with sqlite:// or postgresql:// (e.g. postgresql+psycopg://user@host/db)"
            )
        return value

    @model_validator(mode="after")
    def _default_models_dir(self) -> Settings:
        if "models_dir" not in self.model_fields_set:
            self.models_dir = self.data_dir / "models"
        return self

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'srift.db'}"


def load_settings() -> Settings:
    """Build settings from the environment, turning validation failures into one clear error."""
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"SRIFT_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigurationError(
            f"invalid settings ({problems})", hint="correct those environment variables"
        ) from exc


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
