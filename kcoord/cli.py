"""The `kcoord` command: dispatches to the broker (serve, health, dump-log, groups, config) and to the
analysis (analyze). It sits above both packages; neither imports it."""

from __future__ import annotations

import argparse
import sys

from broker.configs.node_config import BrokerConfig, ConfigError


def _serve(args: argparse.Namespace) -> int:
    import trio

    from broker.observability import logs
    from broker.server import Broker, run_until_signalled

    overrides = [*(args.override or []), *([f"process.nodes={args.nodes}"] if args.nodes is not None else [])]
    try:
        config = BrokerConfig.load(args.config, overrides)
    except ConfigError as exc:
        print(f"kcoord: configuration error: {exc}", file=sys.stderr)
        return 2
    logs.configure(config.get_str("log.level"))
    if config.get_int("process.nodes") > 1:
        return _serve_nodes(config, args.config, overrides)
    # Flushes run in worker threads that need the GIL only briefly; with the default 5 ms switch
    # interval a busy event loop would make each of them wait that long before it can finish.
    sys.setswitchinterval(0.0002)
    broker = Broker(config)
    try:
        trio.run(run_until_signalled, broker)
    except BaseExceptionGroup as group:
        # A startup failure (e.g. the port is taken) surfaces through the root nursery.
        exits = group.subgroup(SystemExit)
        if exits is None:
            raise
        first = _first_leaf(exits)
        if isinstance(first.code, int):
            return first.code  # the reason is in the log (e.g. cluster.etcd_refused)
        print(first, file=sys.stderr)
        return 1
    return 0


def _serve_nodes(config: BrokerConfig, config_path: str | None, overrides: list[str]) -> int:
    from kcoord.launcher.private_etcd import EtcdMissing
    from kcoord.launcher.run import launch

    try:
        return launch(config, config_path, overrides)
    except (ConfigError, EtcdMissing) as exc:
        print(f"kcoord: configuration error: {exc}", file=sys.stderr)
        return 2


def _first_leaf(group: BaseExceptionGroup[SystemExit]) -> SystemExit:
    """The first SystemExit of a group (nested nurseries nest their groups)."""
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def _health(args: argparse.Namespace) -> int:
    from kclient.health import check

    return check(args.bootstrap, args.timeout)


def _config(args: argparse.Namespace) -> int:
    from broker.configs.node_config import render_example_toml, render_markdown_table

    print(render_markdown_table() if args.markdown else render_example_toml())
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand, or, for ``serve``, the broker's own: a broker's process does not load the
    client tools, the doctor and the analysis it never runs (their modules cost an idle broker
    about half a megabyte)."""
    parser = argparse.ArgumentParser(prog="kcoord", description="A Kafka group-coordinator broker.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the broker")
    serve.add_argument("--config", help="TOML or Java .properties file")
    serve.add_argument("--override", action="append", metavar="NAME=VALUE",
                       help="set a property (repeatable); beats env vars and the file")
    serve.add_argument("--nodes", type=int, metavar="N",
                       help="run N node processes on this host as one cluster (process.nodes; docs/cluster.md)")
    serve.set_defaults(func=_serve)

    health = sub.add_parser("health", help="exit 0 when the broker answers and every shard has loaded")
    health.add_argument("--bootstrap", default="127.0.0.1:9092")
    health.add_argument("--timeout", type=float, default=5.0)
    health.set_defaults(func=_health)

    if command != "serve":
        from analytics import cli as analytics_cli
        from kclient import dump_log, groups_command

        dump_log.add_parser(sub)
        groups_command.add_parser(sub)
        analytics_cli.add_parser(sub)  # imports Spark only when the command runs

    config = sub.add_parser("config", help="print every property with its default (TOML)")
    config.add_argument("--markdown", action="store_true", help="print the Markdown table of docs/configuration.md instead")
    config.set_defaults(func=_config)

    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
