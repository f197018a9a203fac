// The public API's vocabulary: users write `import BLE` and nothing else.
//
// BLECore's identifier types (BluetoothUUID, BluetoothAddress, AdvertisingData, ...) are part of every
// signature here, so the module is re-exported whole. From the lower layers only the types the contract
// names are re-exported: the ATT error codes a peripheral manager answers with, the HCI status and the
// Security Manager's failure reason a `BluetoothError` carries, and the simulation API (with the packet type
// its trace handler receives).
@_exported import BLECore
// As `import CoreBluetooth` does: values are Data, identifiers UUID, and delegates run on a DispatchQueue.
@_exported import Dispatch
@_exported import Foundation

@_exported import struct BLEATT.ATTErrorCode
@_exported import enum BLEHCI.HCIPacket
@_exported import struct BLEHCI.HCIStatus
@_exported import enum BLEHost.LinkPHY
@_exported import struct BLESMP.SMPFailureReason
@_exported import enum BLESystem.AppBackgroundMode
@_exported import enum BLESystem.AppLifecycleState
@_exported import struct BLESystem.AppRules
@_exported import enum BLESystem.AppTermination
@_exported import enum BLEVirtualController.HCITraceDirection
@_exported import enum BLEVirtualController.HostControllerLink
@_exported import struct BLEVirtualController.RadioPosition
@_exported import class BLEVirtualController.SimulatedRadio
@_exported import enum BLEVirtualController.SimulationPacing
@_exported import class BLEVirtualController.VirtualController
