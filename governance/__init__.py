"""Model-license and deployment-readiness governance service.

Deliberately empty of imports: `python -m governance.audit.verify` must run with only the
standard library and `cryptography`. The Celery app is loaded by CoreConfig.ready().
"""
