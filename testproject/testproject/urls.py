from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("backwave/", include("backwave_django.urls")),  # the health endpoint: /backwave/health/
]
