from django.urls import path

from governance.evaluations import api

urlpatterns = [
    path("clusters", api.ClusterListApi.as_view(), name="cluster-list"),
    path("clusters/<uuid:code>/test", api.ClusterTestApi.as_view(), name="cluster-test"),
    path("clusters/<uuid:code>/discover", api.ClusterDiscoverApi.as_view(), name="cluster-discover"),
    path("clusters/<uuid:code>/locations", api.ArtifactLocationCreateApi.as_view(), name="artifact-location-create"),
    path("artifacts/<uuid:code>/inspections", api.ArtifactInspectionListApi.as_view(), name="artifact-inspections"),
    path("jobs/<uuid:code>", api.JobRunDetailApi.as_view(), name="job-detail"),
    path("jobs/<uuid:code>/cancel", api.JobRunCancelApi.as_view(), name="job-cancel"),
    path("evals/<uuid:code>", api.EvalRunDetailApi.as_view(), name="eval-detail"),
]
