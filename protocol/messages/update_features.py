"""UpdateFeatures (API key 57, KIP-584): upgrade or downgrade the cluster's finalized feature
levels. v1 replaces AllowDowngrade by an upgrade type and adds validate-only; v2 answers with the
top-level error only."""

from protocol.schema import BOOL, INT8, INT16, INT32, STRING, array, f, message

UpdateFeaturesRequest = message(
    "UpdateFeaturesRequest",
    [
        f("timeout_ms", INT32, default=60000),
        f(
            "feature_updates",
            array(
                "FeatureUpdateKey",
                f("feature", STRING),
                f("max_version_level", INT16),
                f("allow_downgrade", BOOL, "0"),
                f("upgrade_type", INT8, "1+", default=1,
                  about="1 upgrades only, 2 allows safe downgrades, 3 unsafe (lossy) downgrades."),
            ),
        ),
        f("validate_only", BOOL, "1+", default=False),
    ],
    api_key=57,
    valid="0-2",
    flexible="0+",
)

UpdateFeaturesResponse = message(
    "UpdateFeaturesResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f(
            "results",
            array(
                "UpdatableFeatureResult",
                f("feature", STRING),
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+"),
            ),
            "0-1",
            ignorable=True,
        ),
    ],
    api_key=57,
    valid="0-2",
    flexible="0+",
)
