"""Argo CD integration: one Application per chart (with sync waves, CRDs first), the
annotations each object needs, and Lua health checks that read job conditions."""

from __future__ import annotations

from typing import Any

from kubetrain.api.kinds import KINDS, TRAINJOB
from kubetrain.gitops.stack import ArgoCd

# Per-object sync options: CRDs are too large for client-side apply and must never be
# pruned (that would delete every job); ServerSideApply stays off the Application level,
# where it breaks sync waves. Samples may reach the cluster before their CRD exists.
CRD_SYNC_OPTIONS = "ServerSideApply=true,Prune=false"
SAMPLE_SYNC_OPTIONS = "SkipDryRunOnMissingResource=true"
SYNC_OPTIONS_ANNOTATION = "argocd.argoproj.io/sync-options"
SYNC_WAVE_ANNOTATION = "argocd.argoproj.io/sync-wave"
# How a failed automated sync is retried. Argo CD's default for automated syncs is 5 tries
# over about 2.5 minutes, and while they last a fix (a revert, a corrected commit) waits:
# the running operation keeps the revision it started with. Three tries within 35 s still
# ride out a brief API server or webhook outage, and a bad commit reports Failed sooner.
SYNC_RETRY: dict[str, Any] = {
    "limit": 3,
    "backoff": {"duration": "5s", "factor": 2, "maxDuration": "1m"},
}

# Argo CD health of a training job from its conditions (Lua 5.1, as gopher-lua runs it).
HEALTH_LUA = """\
local hs = {status = "Progressing", message = "Waiting for the job to start"}
if obj.spec ~= nil and obj.spec.runPolicy ~= nil and obj.spec.runPolicy.suspend == true then
  hs.status = "Suspended"
  hs.message = "Job is suspended"
end
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
local found = {}
for _, condition in ipairs(obj.status.conditions) do
  if condition.status == "True" then
    found[condition.type] = condition.message or condition.type
  end
end
if found["Failed"] ~= nil then
  hs.status = "Degraded"
  hs.message = found["Failed"]
elseif found["Succeeded"] ~= nil then
  hs.status = "Healthy"
  hs.message = found["Succeeded"]
elseif found["Suspended"] ~= nil then
  hs.status = "Suspended"
  hs.message = found["Suspended"]
elseif found["Running"] ~= nil then
  hs.status = "Healthy"
  hs.message = found["Running"]
elseif found["Restarting"] ~= nil then
  hs.status = "Progressing"
  hs.message = found["Restarting"]
elseif found["Created"] ~= nil then
  hs.status = "Progressing"
  hs.message = found["Created"]
end
return hs
"""


# Argo CD health of a TrainJob: its conditions stay empty until the end (the Kubeflow SDK
# needs that), so progress is read from kubetrain's status.state and the node counts.
TRAINJOB_HEALTH_LUA = """\
local hs = {status = "Progressing", message = "Waiting for the TrainJob to start"}
if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "TrainJob is suspended"
end
if obj.status == nil then
  return hs
end
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.status == "True" and condition.type == "Failed" then
      hs.status = "Degraded"
      hs.message = condition.message or "Failed"
      return hs
    elseif condition.status == "True" and condition.type == "Complete" then
      hs.status = "Healthy"
      hs.message = condition.message or "Complete"
      return hs
    end
  end
end
local state = obj.status.state
local nodes = ""
if obj.status.nodes ~= nil then
  local ready = tostring(obj.status.readyNodes or 0)
  nodes = " (" .. ready .. "/" .. tostring(obj.status.nodes) .. " nodes ready)"
end
if state == "Suspended" then
  hs.status = "Suspended"
  hs.message = "TrainJob is suspended"
elseif state == "Running" then
  hs.status = "Healthy"
  hs.message = "TrainJob is running" .. nodes
elseif state ~= nil then
  hs.status = "Progressing"
  hs.message = "TrainJob is " .. state .. nodes
end
return hs
"""


# Argo CD health of a child Application (Argo CD 1.8 dropped the built-in one, so without
# it an app-of-apps counts a child Healthy as soon as it exists and a sync wave never
# waits for the previous wave). A new Application reports Healthy before its first sync
# (it has no resources yet), so a child is Healthy only once it is also Synced and no
# sync operation runs: then the next wave starts after the previous one is really up. A
# child whose last sync failed (its retries used up) and is not Synced is Degraded: the
# parent's sync then fails too, instead of waiting for that wave for ever, and a fix
# committed afterwards (a revert) is synced. A status compared to another source than the
# spec's (the parent has just changed the child's path) is stale: Progressing, until the
# child has compared its new source; else a large chart's slow compare lets the next wave
# start on the old status.
APPLICATION_HEALTH_LUA = """\
local hs = {status = "Progressing", message = "Waiting for the Application to sync"}
if obj.status == nil then
  return hs
end
local compared = (obj.status.sync or {}).comparedTo or {}
local source = (obj.spec or {}).source
if source ~= nil and compared.source ~= nil and (compared.source.path ~= source.path
    or compared.source.repoURL ~= source.repoURL
    or compared.source.targetRevision ~= source.targetRevision) then
  hs.message = "Waiting for the Application to compare its new source"
  return hs
end
local health = obj.status.health or {}
if health.status == "Degraded" or health.status == "Missing" then
  hs.status = health.status
  hs.message = health.message or health.status
  return hs
end
local synced = obj.status.sync ~= nil and obj.status.sync.status == "Synced"
local op = obj.status.operationState
if op ~= nil and (op.phase == "Running" or op.phase == "Terminating") then
  hs.message = "Sync " .. op.phase
  return hs
end
if op ~= nil and (op.phase == "Failed" or op.phase == "Error") and not synced then
  hs.status = "Degraded"
  hs.message = "Sync failed: " .. (op.message or op.phase)
  return hs
end
if not synced then
  return hs
end
if health.status ~= nil then
  hs.status = health.status
  hs.message = health.message or ""
end
return hs
"""

# Argo CD health of a CustomResourceDefinition. Argo CD's built-in check says Degraded
# from the moment the API server accepts a new CRD's names until it is Established (a
# second or more for large CRDs). Argo CD keeps no tracking annotation on CRDs, so the
# CRD becoming Established does not refresh its Application: the app stayed Degraded
# until its next periodic refresh (20-25 s seen). Here that window is Progressing, and
# Degraded is kept for what needs a fix: names not accepted, a non-structural schema.
CRD_HEALTH_LUA = """\
local hs = {status = "Progressing", message = "Waiting for the CRD to be established"}
if obj.metadata.deletionTimestamp ~= nil then
  hs.message = "CRD is terminating"
  return hs
end
if obj.status == nil or obj.status.conditions == nil then
  return hs
end
local established = false
for _, condition in ipairs(obj.status.conditions) do
  if condition.type == "NamesAccepted" and condition.status == "False" then
    hs.status = "Degraded"
    hs.message = "CRD names not accepted: " .. (condition.message or "")
    return hs
  elseif condition.type == "NonStructuralSchema" and condition.status == "True" then
    hs.status = "Degraded"
    hs.message = "CRD schema is not structural: " .. (condition.message or "")
    return hs
  elseif condition.type == "Established" and condition.status == "True" then
    established = true
  end
end
if established then
  hs.status = "Healthy"
  hs.message = "CRD is established"
end
return hs
"""

#: Argo CD's resource tracking annotation (its default tracking method since 3.0).
TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"


def tracking_id(app_name: str, obj: dict[str, Any]) -> str:
    """The value Argo CD gives ``TRACKING_ANNOTATION`` for ``obj`` deployed by application
    ``app_name``: ``<app>:<group>/<kind>:<namespace>/<name>``. Argo CD's repo server
    leaves it off CRDs, so their status changes do not refresh the app that deploys them;
    written into the CRDs' manifests, it makes the app follow them (Argo CD never deletes
    a CRD on cascade, tracked or not)."""
    group = obj["apiVersion"].rpartition("/")[0]
    meta = obj["metadata"]
    return f"{app_name}:{group}/{obj['kind']}:{meta.get('namespace', '')}/{meta['name']}"


def health_customizations() -> dict[str, str]:
    """``argocd-cm`` data keys (``resource.customizations.health.<group>_<kind>``): every
    job kind's, the Application's (so that sync waves wait for health) and the CRD's (no
    Degraded while a new CRD is being established)."""
    checks = {
        f"resource.customizations.health.{info.group}_{info.kind}": HEALTH_LUA
        for info in KINDS.values()
    }
    checks[f"resource.customizations.health.{TRAINJOB.group}_{TRAINJOB.kind}"] = TRAINJOB_HEALTH_LUA
    checks["resource.customizations.health.argoproj.io_Application"] = APPLICATION_HEALTH_LUA
    checks["resource.customizations.health.apiextensions.k8s.io_CustomResourceDefinition"] = (
        CRD_HEALTH_LUA
    )
    return checks


def argocd_cm_patch(argocd: ArgoCd) -> dict[str, Any]:
    """A patch for Argo CD's ``argocd-cm`` ConfigMap adding the health checks."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "argocd-cm",
            "namespace": argocd.namespace,
            "labels": {
                "app.kubernetes.io/name": "argocd-cm",
                "app.kubernetes.io/part-of": "argocd",
            },
        },
        "data": health_customizations(),
    }


def application(
    argocd: ArgoCd,
    *,
    name: str,
    path: str,
    wave: int,
    destination_namespace: str | None,
    prune: bool,
) -> dict[str, Any]:
    """An Argo CD Application syncing one chart folder."""
    sync_policy: dict[str, Any] = {
        "automated": {"prune": prune, "selfHeal": True},
        "retry": dict(SYNC_RETRY),
    }
    app: dict[str, Any] = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {
            "name": name,
            "namespace": argocd.namespace,
            "annotations": {SYNC_WAVE_ANNOTATION: str(wave)},
            "labels": {"app.kubernetes.io/part-of": "kubetrain"},
        },
        "spec": {
            "project": argocd.project,
            "source": {
                "repoURL": argocd.repo_url,
                "targetRevision": argocd.target_revision,
                "path": path,
            },
            "destination": {"server": argocd.destination_server},
            "syncPolicy": sync_policy,
        },
    }
    if destination_namespace:
        app["spec"]["destination"]["namespace"] = destination_namespace
    if prune:
        # Deleting the Application deletes what it deployed (never used for CRDs).
        app["metadata"]["finalizers"] = ["resources-finalizer.argocd.argoproj.io"]
    return app
