"""The Pulumi program: one ComponentResource per concern, built from a Plan and a Stack.

Owns: turning a Plan into AWS (and, through infra/kubernetes/components/kubernetes_app.py and
infra/kubernetes/components/,
Kubernetes)
resources. Pure builders (no pulumi import) and components/program modules: see infra/README.md.
Must not: compute sizing figures (memory, performance, cost) -- it reads them from the Plan.
`sizing/` never imports this package at module level; `llmcap render` imports it lazily.
"""
