"""CreateAcls, DescribeAcls and DeleteAcls (KIP-140, KIP-290 for pattern types): v0 to v3.

Each request's bindings or filters are validated by the sans-IO core
(:func:`~impl.security.authorizer.validate_binding`, :meth:`AclBindingFilter.validate`), then
applied through the :class:`~impl.security.acl_store.AclStore`. Without an authorizer
(``authorizer.class.name`` unset) every result is SECURITY_DISABLED, as in Kafka. The ALTER or
DESCRIBE on the cluster these APIs need is checked by the dispatcher
(:mod:`impl.security.request_acls`).
"""

from __future__ import annotations

import logging
from typing import Any, Final

from impl.broker._codec import DecodedRequest, encode_response
from impl.broker._kio_build import build

from .acl_store import AclStore, AclStoreError
from .authorizer import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)
from .request_acls import SECURITY_DISABLED

log = logging.getLogger(__name__)

NONE: Final = 0
UNKNOWN_SERVER_ERROR: Final = -1
INVALID_REQUEST: Final = 42
#: Versions answered (v0 has no pattern type: LITERAL).
VERSIONS: Final = (0, 3)

_DISABLED_MESSAGE: Final = "no authorizer is configured on the broker (authorizer.class.name)"


def _enum(kind: type[Any], value: int) -> Any:
    try:
        return kind(int(value))
    except ValueError:
        return kind(0)


def _pattern_type(item: Any, field: str) -> PatternType:
    found: PatternType = _enum(PatternType, int(getattr(item, field, PatternType.LITERAL)))
    return found


def binding_of(item: Any) -> AclBinding:
    """The binding of one CreateAcls creation."""
    return AclBinding(
        ResourcePattern(_enum(ResourceType, item.resource_type), item.resource_name,
                        _pattern_type(item, "resource_pattern_type")),
        AccessControlEntry(item.principal, item.host, _enum(AclOperation, item.operation),
                           _enum(AclPermissionType, item.permission_type)),
    )


def filter_of(item: Any) -> AclBindingFilter:
    """The filter of a DescribeAcls request or a DeleteAcls filter."""
    return AclBindingFilter(
        resource_type=_enum(ResourceType, item.resource_type_filter),
        name=item.resource_name_filter,
        pattern_type=_pattern_type(item, "pattern_type_filter"),
        principal=item.principal_filter,
        host=item.host_filter,
        operation=_enum(AclOperation, item.operation),
        permission=_enum(AclPermissionType, item.permission_type),
    )


def _binding_fields(binding: AclBinding) -> dict[str, Any]:
    return {
        "resource_type": int(binding.pattern.resource_type),
        "resource_name": binding.pattern.name,
        "pattern_type": int(binding.pattern.pattern_type),
        "principal": binding.entry.principal,
        "host": binding.entry.host,
        "operation": int(binding.entry.operation),
        "permission_type": int(binding.entry.permission),
    }


class AclApis:
    """The three ACL handlers.

    Args:
        store: the ACL store (None: no authorizer configured).
    """

    def __init__(self, store: AclStore | None) -> None:
        self.store = store

    @staticmethod
    def _answer(request: DecodedRequest, data: dict[str, Any]) -> bytes:
        return encode_response(request, build(request.response_class, data))

    async def create_acls(self, request: DecodedRequest) -> bytes:
        """CreateAcls: validate each creation, then store the valid ones."""
        results: list[dict[str, Any]] = []
        valid: list[AclBinding] = []
        for item in request.body.creations:
            if self.store is None:
                results.append({"error_code": SECURITY_DISABLED,
                                "error_message": _DISABLED_MESSAGE})
                continue
            binding = binding_of(item)
            try:
                validate_binding(binding)
            except InvalidAcl as error:
                results.append({"error_code": INVALID_REQUEST, "error_message": str(error)})
                continue
            valid.append(binding)
            results.append({"error_code": NONE, "error_message": None})
        if self.store is not None and valid:
            try:
                await self.store.create(valid)
            except AclStoreError as error:
                log.warning("CreateAcls: %s", error)
                for result in results:
                    if result["error_code"] == NONE:
                        result.update(error_code=UNKNOWN_SERVER_ERROR, error_message=str(error))
        return self._answer(request, {"throttle_time": 0, "results": results})

    async def describe_acls(self, request: DecodedRequest) -> bytes:
        """DescribeAcls: the cached bindings matching the filter, grouped per pattern."""
        if self.store is None:
            return self._answer(request, {"throttle_time": 0, "error_code": SECURITY_DISABLED,
                                          "error_message": _DISABLED_MESSAGE, "resources": []})
        query = filter_of(request.body)
        try:
            query.validate()
        except InvalidAcl as error:
            return self._answer(request, {"throttle_time": 0, "error_code": INVALID_REQUEST,
                                          "error_message": str(error), "resources": []})
        grouped: dict[ResourcePattern, list[dict[str, Any]]] = {}
        for binding in self.store.describe(query):
            grouped.setdefault(binding.pattern, []).append({
                "principal": binding.entry.principal, "host": binding.entry.host,
                "operation": int(binding.entry.operation),
                "permission_type": int(binding.entry.permission),
            })
        if request.api_version == 0:
            grouped = {pattern: acls for pattern, acls in grouped.items()
                       if pattern.pattern_type is PatternType.LITERAL}
        resources = [
            {"resource_type": int(pattern.resource_type), "resource_name": pattern.name,
             "pattern_type": int(pattern.pattern_type), "acls": acls}
            for pattern, acls in sorted(grouped.items())
        ]
        return self._answer(request, {"throttle_time": 0, "error_code": NONE,
                                      "error_message": None, "resources": resources})

    async def delete_acls(self, request: DecodedRequest) -> bytes:
        """DeleteAcls: for each filter, the bindings it removed (or its error)."""
        results: list[dict[str, Any]] = []
        for item in request.body.filters:
            if self.store is None:
                results.append({"error_code": SECURITY_DISABLED,
                                "error_message": _DISABLED_MESSAGE, "matching_acls": []})
                continue
            query = filter_of(item)
            try:
                query.validate()
                deleted = await self.store.delete(query)
            except InvalidAcl as error:
                results.append({"error_code": INVALID_REQUEST, "error_message": str(error),
                                "matching_acls": []})
                continue
            except AclStoreError as error:
                results.append({"error_code": UNKNOWN_SERVER_ERROR, "error_message": str(error),
                                "matching_acls": []})
                continue
            results.append({
                "error_code": NONE, "error_message": None,
                "matching_acls": [{"error_code": NONE, "error_message": None,
                                   **_binding_fields(binding)} for binding in deleted],
            })
        return self._answer(request, {"throttle_time": 0, "filter_results": results})
