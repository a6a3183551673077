"""Configs of topics, brokers and groups as AlterConfigs, IncrementalAlterConfigs, DescribeConfigs
and ListConfigResources see them: the definitions, the dynamic values kept durably, validation."""
