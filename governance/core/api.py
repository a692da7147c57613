"""Core API: who am I (roles, teams)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.core.roles import user_roles


class MeOutputSerializer(serializers.Serializer):
    username = serializers.CharField()
    roles = serializers.ListField(child=serializers.CharField())
    teams = serializers.ListField(child=serializers.CharField())


class MeApi(APIView):
    @extend_schema(responses=MeOutputSerializer, summary="The calling user, its roles and teams")
    def get(self, request: Request) -> Response:
        user = request.user
        data = {
            "username": user.get_username(),
            "roles": sorted(user_roles(user)),
            "teams": sorted(user.teams.values_list("name", flat=True)),  # type: ignore[union-attr]
        }
        return Response(MeOutputSerializer(data).data)
