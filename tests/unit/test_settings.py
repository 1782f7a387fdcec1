from __future__ import annotations

from pathlib import Path

import pytest

from workers.settings import Settings, SettingsError


def test_nothing_set_means_everything_embedded_under_the_data_dir(tmp_path: Path) -> None:
    s = Settings.from_env({}, data_dir=tmp_path)
    assert s.database_url == f"sqlite:///{tmp_path / 'nightshift.db'}"
    assert s.broker_url == "filesystem://" and s.embedded_broker
    assert s.result_backend == f"file://{tmp_path / 'results'}"
    assert s.sandbox_root == str(tmp_path / "sandboxes")


def test_environment_is_read_once_and_flags_win(tmp_path: Path) -> None:
    env = {
        "NIGHTSHIFT_DATABASE_URL": "postgresql://x@db/ns",
        "NIGHTSHIFT_BROKER_URL": "redis://cache:6379/0",
        "NIGHTSHIFT_LEASE_SECONDS": "5",
        "NIGHTSHIFT_AGENTS": "mine=pkg.mod:fn; other = a.b:c",
    }
    s = Settings.from_env(env, data_dir=tmp_path, broker_url="amqp://guest@rabbit//")
    assert s.database_url == "postgresql://x@db/ns"
    assert s.broker_url == "amqp://guest@rabbit//" and not s.embedded_broker
    assert s.lease_seconds == 5
    assert s.agents == {"mine": "pkg.mod:fn", "other": "a.b:c"}
    assert Settings.from_env(s.to_env()) == s


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("NIGHTSHIFT_LEASE_SECONDS", "soon", "NIGHTSHIFT_LEASE_SECONDS='soon'"),
        ("NIGHTSHIFT_LEASE_SECONDS", "0", "must be positive"),
        ("NIGHTSHIFT_AGENTS", "broken", "not name=module:callable"),
    ],
)
def test_bad_values_name_the_variable(name: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env({name: value})


def test_each_app_has_its_own_runtime_even_when_ids_are_reused(tmp_path: Path) -> None:
    import gc

    from workers.app import create_app
    from workers.runtime import runtime_of

    seen = {}
    for n in range(20):  # ids of collected apps are reused; runtimes must not be
        url = f"sqlite:///{tmp_path / f'{n}.db'}"
        app = create_app(Settings(data_dir=tmp_path, database_url=url))
        seen[id(app)] = url
        assert runtime_of(app).settings.database_url == url
        del app
        gc.collect()


@pytest.mark.parametrize("scheme", ["amqp", "amqps", "pyamqp"])
def test_an_amqp_result_backend_is_refused_by_name_without_its_password(scheme: str) -> None:
    url = f"{scheme}://guest:s3cret@rabbit:5672//"
    with pytest.raises(SettingsError, match="NIGHTSHIFT_RESULT_BACKEND") as refused:
        Settings.from_env({"NIGHTSHIFT_BROKER_URL": url, "NIGHTSHIFT_RESULT_BACKEND": url})
    assert "db+postgresql+psycopg2://" in str(refused.value) and "s3cret" not in str(refused.value)


def test_a_worker_on_rabbitmq_reconnects_when_the_broker_closes_its_channel(
    tmp_path: Path,
) -> None:
    # RabbitMQ closes the channel of a consumer holding a message past its
    # consumer_timeout (a run longer than 30 min); Celery exits on a channel error
    # unless `broker_channel_error_retry` is set.
    from workers.app import create_app

    rabbit = create_app(Settings(data_dir=tmp_path, broker_url="amqp://guest@rabbit//"))
    assert rabbit.conf.broker_channel_error_retry is True
    embedded = create_app(Settings(data_dir=tmp_path))
    assert embedded.conf.broker_channel_error_retry is False


@pytest.mark.parametrize(("timeout", "sweep"), [(1, 1), (5, 1), (30, 6), (300, 10), (3600, 10)])
def test_redis_sweeps_for_dead_consumers_messages_at_a_fifth_of_the_visibility_timeout(
    tmp_path: Path, timeout: int, sweep: int
) -> None:
    # kombu's own cadence scans for them about every 100 s, whatever the timeout.
    from kombu import Connection

    from workers.app import create_app

    app = create_app(
        Settings(
            data_dir=tmp_path,
            broker_url="redis://127.0.0.1:6379/0",
            broker_visibility_timeout=timeout,
        )
    )
    channel_options = Connection(app.conf.broker_url).transport.Channel.from_transport_options
    options = app.conf.broker_transport_options
    assert set(options) <= set(channel_options)  # all of them kombu Redis options
    assert options == {
        "visibility_timeout": timeout,
        "unacked_restore_interval": sweep,
        "unacked_restore_throttle": 1,
        "unacked_mutex_expire": 10,
    }
