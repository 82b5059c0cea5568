"""Policy files: loading, schema checks, compilation and hot reload."""
