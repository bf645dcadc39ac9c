// The Azure deployment the tour stands for: a GPU scale set for inference that the
// autoscaler takes down to zero, the storage account for checkpoints and backups,
// a Log Analytics workspace for the gateway's audit lines and alerts, and a
// user-assigned identity so nothing holds a storage key.
// `bicep build main.bicep` compiles it to main.json, which `gantry assess run` reads.
param location string = resourceGroup().location
param prefix string = 'tour'
param vmSize string = 'Standard_NC24ads_A100_v4'
param maxInstances int = 4

var suffix = uniqueString(resourceGroup().id)

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: '${prefix}-id'
  location: location
}

resource storage 'Microsoft.Storage/storageAccounts@2023-01-01' = {
  name: 'st${suffix}'
  location: location
  sku: { name: 'Standard_ZRS' }
  kind: 'StorageV2'
  properties: {
    supportsHttpsTrafficOnly: true
    minimumTlsVersion: 'TLS1_2'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
  }
}

resource blob 'Microsoft.Storage/storageAccounts/blobServices@2023-01-01' = {
  parent: storage
  name: 'default'
  properties: {
    deleteRetentionPolicy: { enabled: true, days: 14 }
    containerDeleteRetentionPolicy: { enabled: true, days: 14 }
    isVersioningEnabled: true
  }
}

resource logs 'Microsoft.OperationalInsights/workspaces@2022-10-01' = {
  name: '${prefix}-logs'
  location: location
  properties: {
    sku: { name: 'PerGB2018' }
    retentionInDays: 30
  }
}

resource inference 'Microsoft.Compute/virtualMachineScaleSets@2023-09-01' = {
  name: '${prefix}-inference'
  location: location
  sku: { name: vmSize, tier: 'Standard', capacity: 0 }
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: { '${identity.id}': {} }
  }
  properties: {
    orchestrationMode: 'Uniform'
    upgradePolicy: { mode: 'Manual' }
    virtualMachineProfile: {
      osProfile: {
        computerNamePrefix: prefix
        adminUsername: 'azureuser'
        linuxConfiguration: {
          disablePasswordAuthentication: true
          ssh: { publicKeys: [ { path: '/home/azureuser/.ssh/authorized_keys', keyData: 'ssh-ed25519 AAAA tour' } ] }
        }
      }
      storageProfile: {
        imageReference: { publisher: 'microsoft-dsvm', offer: 'ubuntu-hpc', sku: '2204', version: 'latest' }
        osDisk: { createOption: 'FromImage', managedDisk: { storageAccountType: 'Premium_LRS' } }
      }
      networkProfile: { networkInterfaceConfigurations: [] }
    }
  }
}

output maxInstances int = maxInstances
