"""ApiVersions (API key 18). The response always travels with response header v0 (KIP-511).

v5 (KIP-1242) lets a client name the cluster and node it means to reach: a broker that is not
that node answers REBOOTSTRAP_REQUIRED."""

from protocol.schema import BOOL, INT16, INT32, INT64, STRING, array, f, message

ApiVersionsRequest = message(
    "ApiVersionsRequest",
    [
        f("client_software_name", STRING, "3+", ignorable=True),
        f("client_software_version", STRING, "3+", ignorable=True),
        f("cluster_id", STRING, "5+", nullable="5+", default=None, ignorable=True),
        f("node_id", INT32, "5+", default=-1, ignorable=True),
    ],
    api_key=18,
    valid="0-5",
    flexible="3+",
)

ApiVersionsResponse = message(
    "ApiVersionsResponse",
    [
        f("error_code", INT16),
        f(
            "api_keys",
            array(
                "ApiVersion",
                f("api_key", INT16),
                f("min_version", INT16),
                f("max_version", INT16),
            ),
        ),
        f("throttle_time_ms", INT32, "1+", ignorable=True),
        f(
            "supported_features",
            array(
                "SupportedFeatureKey",
                f("name", STRING, "3+"),
                f("min_version", INT16, "3+"),
                f("max_version", INT16, "3+"),
            ),
            "3+",
            tag=0,
            ignorable=True,
        ),
        f("finalized_features_epoch", INT64, "3+", tag=1, default=-1, ignorable=True),
        f(
            "finalized_features",
            array(
                "FinalizedFeatureKey",
                f("name", STRING, "3+"),
                f("max_version_level", INT16, "3+"),
                f("min_version_level", INT16, "3+"),
            ),
            "3+",
            tag=2,
            ignorable=True,
        ),
        f("zk_migration_ready", BOOL, "3+", tag=3, default=False, ignorable=True),
    ],
    api_key=18,
    valid="0-5",
    flexible="3+",
)
