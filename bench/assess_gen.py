#!/usr/bin/env python3
"""Generates inputs for bench/assess.sh: an ARM template and a Terraform plan
(`terraform show -json` shape) of N resources each, shaped like an ML platform
repeated per team: a workspace, a GPU compute cluster, a compute instance, a
storage account and a key vault (five resources a team), with parameters,
variables and template expressions in the ARM template and one child module a
team in the plan. Deterministic: the same N gives the same bytes.

usage: assess_gen.py arm|tf N OUT.json
"""
import json
import sys


def arm(n):
    teams = (n + 4) // 5
    resources = []
    for t in range(teams):
        ws = f"[concat(variables('prefix'), '-ws-{t}')]"
        resources += [
            {
                "type": "Microsoft.MachineLearningServices/workspaces",
                "apiVersion": "2024-10-01",
                "name": ws,
                "location": "[parameters('location')]",
                "tags": {"team": f"team-{t}"},
                "identity": {"type": "SystemAssigned"},
                "properties": {
                    "publicNetworkAccess": "[if(equals(mod(" + str(t) + ", 3), 0), 'Enabled', 'Disabled')]",
                    "storageAccount": f"[resourceId('Microsoft.Storage/storageAccounts', concat(variables('sa'), '{t}'))]",
                    "keyVault": f"[resourceId('Microsoft.KeyVault/vaults', concat(variables('prefix'), '-kv-{t}'))]",
                },
            },
            {
                "type": "Microsoft.MachineLearningServices/workspaces/computes",
                "apiVersion": "2024-10-01",
                "name": f"[format('{{0}}-ws-{t}/gpu', variables('prefix'))]",
                "location": "[parameters('location')]",
                "properties": {
                    "computeType": "AmlCompute",
                    "disableLocalAuth": t % 2 == 0,
                    "properties": {
                        "vmSize": "[parameters('gpuSize')]",
                        "vmPriority": "Dedicated",
                        "scaleSettings": {"minNodeCount": t % 3, "maxNodeCount": 8,
                                          "nodeIdleTimeBeforeScaleDown": "PT30M"},
                    },
                },
            },
            {
                "type": "Microsoft.MachineLearningServices/workspaces/computes",
                "apiVersion": "2024-10-01",
                "name": f"[format('{{0}}-ws-{t}/ci-{t}', variables('prefix'))]",
                "location": "[parameters('location')]",
                "properties": {
                    "computeType": "ComputeInstance",
                    "properties": {"vmSize": "Standard_NC24ads_A100_v4",
                                   "idleTimeBeforeShutdown": "PT60M" if t % 2 else None},
                },
            },
            {
                "type": "Microsoft.Storage/storageAccounts",
                "apiVersion": "2023-01-01",
                "name": f"[concat(variables('sa'), '{t}')]",
                "location": "[parameters('location')]",
                "sku": {"name": "Standard_LRS"},
                "kind": "StorageV2",
                "properties": {"minimumTlsVersion": "TLS1_2", "allowBlobPublicAccess": t % 4 == 0},
            },
            {
                "type": "Microsoft.KeyVault/vaults",
                "apiVersion": "2023-07-01",
                "name": f"[concat(variables('prefix'), '-kv-{t}')]",
                "location": "[parameters('location')]",
                "properties": {"tenantId": "[subscription().tenantId]", "sku": {"family": "A", "name": "standard"},
                               "enableSoftDelete": True, "enablePurgeProtection": t % 2 == 0},
            },
        ]
    return {
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {
            "location": {"type": "string", "defaultValue": "eastus"},
            "gpuSize": {"type": "string", "defaultValue": "Standard_ND96isr_H100_v5"},
            "env": {"type": "string", "defaultValue": "prod", "allowedValues": ["dev", "prod"]},
        },
        "variables": {"prefix": "[concat('ml-', parameters('env'))]",
                      "sa": "[toLower(concat('st', parameters('env')))]"},
        "resources": resources[:n],
    }


def tf(n):
    teams = (n + 4) // 5
    modules, changes = [], []

    def res(mod, typ, name, values):
        addr = f"module.team{mod}.{typ}.{name}"
        changes.append({"address": addr, "module_address": f"module.team{mod}", "mode": "managed",
                        "type": typ, "name": name,
                        "change": {"actions": ["create"], "before": None, "after": values,
                                   "after_unknown": {"id": True}}})
        return {"address": addr, "mode": "managed", "type": typ, "name": name,
                "provider_name": "registry.terraform.io/hashicorp/azurerm", "values": values,
                "sensitive_values": {}}

    count = 0
    for t in range(teams):
        rs = [
            res(t, "azurerm_machine_learning_workspace", "ws",
                {"name": f"ws-{t}", "location": "eastus", "resource_group_name": "rg-ml",
                 "public_network_access_enabled": t % 3 == 0, "high_business_impact": False,
                 "identity": [{"type": "SystemAssigned"}], "tags": {"team": f"team-{t}"}}),
            res(t, "azurerm_machine_learning_compute_cluster", "gpu",
                {"name": "gpu", "location": "eastus", "vm_size": "Standard_ND96isr_H100_v5",
                 "vm_priority": "Dedicated", "local_auth_enabled": t % 2 == 1,
                 "scale_settings": [{"min_node_count": t % 3, "max_node_count": 8,
                                     "scale_down_nodes_after_idle_duration": "PT30M"}]}),
            res(t, "azurerm_machine_learning_compute_instance", "ci",
                {"name": f"ci-{t}", "virtual_machine_size": "Standard_NC24ads_A100_v4",
                 "local_auth_enabled": False}),
            res(t, "azurerm_storage_account", "st",
                {"name": f"st{t}", "location": "eastus", "account_tier": "Standard",
                 "account_replication_type": "LRS", "min_tls_version": "TLS1_2",
                 "allow_nested_items_to_be_public": t % 4 == 0}),
            res(t, "azurerm_key_vault", "kv",
                {"name": f"kv-{t}", "location": "eastus", "sku_name": "standard",
                 "purge_protection_enabled": t % 2 == 0, "soft_delete_retention_days": 90}),
        ]
        rs = rs[: max(0, n - count)]
        count += len(rs)
        if rs:
            modules.append({"address": f"module.team{t}", "resources": rs})
    return {"format_version": "1.2", "terraform_version": "1.9.5",
            "planned_values": {"root_module": {"resources": [], "child_modules": modules}},
            "resource_changes": changes}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("arm", "tf"):
        sys.exit(__doc__)
    n = int(sys.argv[2])
    doc = arm(n) if sys.argv[1] == "arm" else tf(n)
    with open(sys.argv[3], "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
