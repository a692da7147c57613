from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from governance.core.admin_base import AuditedModelAdmin, ReadOnlyModelAdmin
from governance.evaluations.models import Cluster, JobRun
from governance.evaluations.services import cluster_discover, cluster_test_connection


@admin.register(Cluster)
class ClusterAdmin(AuditedModelAdmin):
    list_display = ("name", "executor", "host", "port", "partition", "last_test_ok", "discovered_at")
    readonly_fields = ("last_test_at", "last_test_ok", "last_test_message", "inventory", "discovered_at")
    actions = ["test_connection", "discover"]

    @admin.action(description="Test the connection")
    def test_connection(self, request: HttpRequest, queryset: QuerySet[Cluster]) -> None:
        for cluster in queryset:
            tested = cluster_test_connection(cluster=cluster)
            level = messages.SUCCESS if tested.last_test_ok else messages.ERROR
            self.message_user(request, f"{cluster}: {tested.last_test_message}", level=level)

    @admin.action(description="Discover nodes and GPUs (submits a job)")
    def discover(self, request: HttpRequest, queryset: QuerySet[Cluster]) -> None:
        for cluster in queryset:
            run = cluster_discover(cluster=cluster, actor=request.user)  # type: ignore[arg-type]
            self.message_user(request, f"{cluster}: discovery job {run.code} queued")


@admin.register(JobRun)
class JobRunAdmin(ReadOnlyModelAdmin):
    list_display = ("code", "cluster", "kind", "state", "attempt", "job_id", "submitted_at", "finished_at")
    list_filter = ("state", "kind", "cluster")
