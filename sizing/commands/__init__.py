"""One module per CLI command group. Each keeps heavy imports (pulumi, boto3, matplotlib)
inside the command function so `llmcap plan` stays fast."""
