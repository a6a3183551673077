"""What a Spark session for `kcoord analyze` starts with, decided before any JVM runs."""

from __future__ import annotations

from analytics.job import SMALL_INPUT_BYTES, session_conf


def test_a_local_master_keeps_the_driver_on_loopback_without_a_ui() -> None:
    for master in ("local", "local[2]", "local[*]"):
        conf = session_conf(master)
        assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1", master
        assert conf["spark.ui.enabled"] == "false", master


def test_a_cluster_master_is_left_to_the_cluster() -> None:
    conf = session_conf("spark://spark-master:7077", input_bytes=100)
    assert not {"spark.driver.host", "spark.driver.bindAddress", "spark.ui.enabled",
                "spark.sql.shuffle.partitions", "spark.driver.extraJavaOptions"} & set(conf)


def test_only_small_local_inputs_get_the_short_run_settings() -> None:
    small = session_conf("local[*]", input_bytes=10_000)
    assert small["spark.sql.shuffle.partitions"] == "1"
    assert "TieredStopAtLevel=1" in small["spark.driver.extraJavaOptions"]
    large = session_conf("local[*]", input_bytes=SMALL_INPUT_BYTES * 50)
    assert "spark.sql.shuffle.partitions" not in large and "spark.driver.extraJavaOptions" not in large
