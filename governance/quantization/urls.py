from django.urls import path

from governance.quantization import api

urlpatterns = [
    path("quantize", api.QuantizeRunCreateApi.as_view(), name="quantize-create"),
    path("quantize/recipes", api.RecipeListApi.as_view(), name="quantize-recipes"),
    path("quantize/<uuid:code>", api.QuantizeRunDetailApi.as_view(), name="quantize-detail"),
]
