"""Money: the plan's cost lines and $/1M tokens (`money`), hosted-API comparison, and the
Infracost-style per-resource pricing of the rendered program (`resources`).
"""
