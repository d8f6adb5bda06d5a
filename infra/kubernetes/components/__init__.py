"""The Kubernetes side's ComponentResources, one per concern, children of `infra.kubernetes.components.kubernetes_app.
KubernetesApp`: a serving pool (`pool.py`), the router (`router.py`), observability
(`observability.py`), one weights copy per checkpoint (`weights_job.py`); `apply.py` turns a plain
manifest into its typed pulumi_kubernetes resource. They create what the pure builders
(infra/kubernetes/serving.py, router.py, observability.py, weights.py, autoscaling.py) return and compute nothing.
"""
