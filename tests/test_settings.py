"""Settings come from SRIFT_* variables and fail with one clear message."""

from __future__ import annotations

import pytest

from srift.errors import ConfigurationError
from srift.settings import load_settings


def test_defaults_use_embedded_sqlite(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("SRIFT_DATABASE_URL", raising=False)
    monkeypatch.setenv("SRIFT_DATA_DIR", str(tmp_path))
    settings = load_settings()
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / 'srift.db'}"
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)
    assert settings.cors_origins == []


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("SRIFT_PORT", "70000", "SRIFT_PORT"),
        ("SRIFT_DATABASE_URL", "mysql://x", "SRIFT_DATABASE_URL"),
        ("SRIFT_LOG_LEVEL", "loud", "SRIFT_LOG_LEVEL"),
    ],
)
def test_invalid_setting_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, needle: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    assert needle in str(info.value)
    assert "To fix:" in str(info.value)


def test_a_checkout_keeps_data_in_var_and_an_installed_package_in_the_users_data_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    import srift.settings as settings_module

    monkeypatch.delenv("SRIFT_DATA_DIR", raising=False)
    assert settings_module.is_checkout()
    assert load_settings().data_dir == settings_module.REPO_ROOT / "var"

    site = tmp_path / "site-packages"
    (site / "srift").mkdir(parents=True)
    (site / "srift" / "__init__.py").write_text("")
    assert not settings_module.is_checkout(site)
    (site / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert not settings_module.is_checkout(site)

    monkeypatch.setattr(settings_module, "is_checkout", lambda root=None: False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    installed = load_settings()
    assert installed.data_dir == tmp_path / "xdg" / "srift"
    assert installed.resolved_database_url == f"sqlite:///{tmp_path / 'xdg' / 'srift' / 'srift.db'}"
    assert installed.models_dir == tmp_path / "xdg" / "srift" / "models"
