// The public API's vocabulary: users write `import BLE` and nothing else.
//
// BLECore's identifier types (BluetoothUUID, BluetoothAddress, AdvertisingData, ...) are part of every
// signature here, so the module is re-exported whole. From the lower layers only the types the contract
// names are re-exported: the ATT error codes a peripheral manager answers with, and the simulation API.
@_exported import BLECore

@_exported import struct BLEATT.ATTErrorCode
@_exported import struct BLEVirtualController.RadioPosition
@_exported import class BLEVirtualController.SimulatedRadio
@_exported import enum BLEVirtualController.SimulationPacing
@_exported import class BLEVirtualController.VirtualController
