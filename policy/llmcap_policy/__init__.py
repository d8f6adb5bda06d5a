"""llmcap's Pulumi policy pack: `rules` (plain functions over resources, no pulumi import) and
`pack` (the pulumi_policy policies that wrap them)."""
