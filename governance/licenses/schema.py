"""The OpenAPI shape of the deployment facts. The values are validated by `facts.normalize_facts`
(one place, shared with the management command and the engine); these serializers only describe
each field in the schema, so clients see a typed object instead of a free-form one."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from governance.licenses.facts import AUP_CATEGORIES, DERIVATIVE_KINDS, DISTRIBUTIONS, USE_CASES


class RevenueSchema(serializers.Serializer):
    amount = serializers.FloatField(min_value=0, help_text="revenue of one month, in `currency`")
    currency = serializers.CharField(help_text="ISO 4217 code of the FX table (USD, EUR, CNY, …)")


class DerivativeSchema(serializers.Serializer):
    kind = serializers.ChoiceField(choices=DERIVATIVE_KINDS, help_text="what was done to the weights")
    distribution = serializers.ChoiceField(choices=DISTRIBUTIONS, help_text="who receives the derived weights")
    name = serializers.CharField(allow_null=True, help_text="the derivative's planned public name (naming rules)")


class FactsSchema(serializers.Serializer):
    """Every field is optional: a missing one takes its most conservative value and adds a
    `facts.assumed` finding. Unknown fields are refused (400 naming the field)."""

    use_case = serializers.ChoiceField(
        choices=USE_CASES, required=False, help_text="research | evaluation | internal | external_commercial"
    )
    commercial_entity = serializers.BooleanField(required=False, help_text="the deployer is a commercial entity")
    hosted_service = serializers.BooleanField(required=False, help_text="served to third parties (API, SaaS, app)")
    production = serializers.BooleanField(required=False, help_text="a production deployment")
    monthly_active_users = serializers.IntegerField(
        min_value=0, required=False, allow_null=True, help_text="current monthly active users of the product"
    )
    monthly_active_users_at_model_release = serializers.IntegerField(
        min_value=0, required=False, allow_null=True, help_text="MAU on the model's release date (Llama counts then)"
    )
    monthly_revenue = RevenueSchema(required=False, allow_null=True)
    org_country = serializers.CharField(
        required=False, allow_null=True, help_text="ISO 3166-1 alpha-2 of the principal place of business"
    )
    multimodal = serializers.BooleanField(required=False, help_text="images or other non-text inputs are used")
    outputs_used_to_train_other_models = serializers.BooleanField(
        required=False, help_text="outputs train or improve another model"
    )
    derivative = DerivativeSchema(required=False)
    redistributes_original_weights = serializers.BooleanField(
        required=False, help_text="the original weights are given to others"
    )
    intended_uses = serializers.ListField(
        child=serializers.ChoiceField(choices=AUP_CATEGORIES),
        required=False,
        help_text="acceptable-use categories the product touches",
    )
    guardrails_removed = serializers.BooleanField(
        required=False,
        help_text="safety guardrails are removed (counts as the intended use safety_circumvention)",
    )


@extend_schema_field(FactsSchema)
class FactsField(serializers.JSONField):
    """Parsed as JSON, validated by normalize_facts, documented as FactsSchema."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError("must be a JSON object")
        return super().to_internal_value(data)
