/// Names of the common SIG-assigned services, characteristics and descriptors, from the Bluetooth SIG's
/// Assigned Numbers document (sections 3.4 GATT Services, 3.8 Characteristics, 3.7 Descriptors).
extension BluetoothUUID {
    // MARK: Services
    public static let genericAccess = BluetoothUUID(0x1800)
    public static let genericAttribute = BluetoothUUID(0x1801)
    public static let immediateAlert = BluetoothUUID(0x1802)
    public static let linkLoss = BluetoothUUID(0x1803)
    public static let txPowerService = BluetoothUUID(0x1804)
    public static let currentTimeService = BluetoothUUID(0x1805)
    public static let healthThermometer = BluetoothUUID(0x1809)
    public static let deviceInformation = BluetoothUUID(0x180A)
    public static let heartRate = BluetoothUUID(0x180D)
    public static let battery = BluetoothUUID(0x180F)
    public static let bloodPressure = BluetoothUUID(0x1810)
    public static let humanInterfaceDevice = BluetoothUUID(0x1812)
    public static let runningSpeedAndCadence = BluetoothUUID(0x1814)
    public static let cyclingSpeedAndCadence = BluetoothUUID(0x1816)
    public static let environmentalSensing = BluetoothUUID(0x181A)

    // MARK: Characteristics
    public static let deviceName = BluetoothUUID(0x2A00)
    public static let appearance = BluetoothUUID(0x2A01)
    public static let peripheralPreferredConnectionParameters = BluetoothUUID(0x2A04)
    public static let serviceChanged = BluetoothUUID(0x2A05)
    public static let batteryLevel = BluetoothUUID(0x2A19)
    public static let temperatureMeasurement = BluetoothUUID(0x2A1C)
    public static let temperatureType = BluetoothUUID(0x2A1D)
    public static let systemID = BluetoothUUID(0x2A23)
    public static let modelNumberString = BluetoothUUID(0x2A24)
    public static let serialNumberString = BluetoothUUID(0x2A25)
    public static let firmwareRevisionString = BluetoothUUID(0x2A26)
    public static let hardwareRevisionString = BluetoothUUID(0x2A27)
    public static let softwareRevisionString = BluetoothUUID(0x2A28)
    public static let manufacturerNameString = BluetoothUUID(0x2A29)
    public static let pnpID = BluetoothUUID(0x2A50)
    public static let heartRateMeasurement = BluetoothUUID(0x2A37)
    public static let bodySensorLocation = BluetoothUUID(0x2A38)
    public static let heartRateControlPoint = BluetoothUUID(0x2A39)
    public static let clientSupportedFeatures = BluetoothUUID(0x2B29)
    public static let databaseHash = BluetoothUUID(0x2B2A)

    // MARK: Descriptors
    public static let characteristicExtendedProperties = BluetoothUUID(0x2900)
    public static let characteristicUserDescription = BluetoothUUID(0x2901)
    public static let clientCharacteristicConfiguration = BluetoothUUID(0x2902)
    public static let serverCharacteristicConfiguration = BluetoothUUID(0x2903)
    public static let characteristicPresentationFormat = BluetoothUUID(0x2904)
    public static let characteristicAggregateFormat = BluetoothUUID(0x2905)

    // MARK: GATT attribute types
    public static let primaryService = BluetoothUUID(0x2800)
    public static let secondaryService = BluetoothUUID(0x2801)
    public static let include = BluetoothUUID(0x2802)
    public static let characteristicDeclaration = BluetoothUUID(0x2803)

    static let names: [BluetoothUUID: String] = [
        .genericAccess: "Generic Access",
        .genericAttribute: "Generic Attribute",
        .immediateAlert: "Immediate Alert",
        .linkLoss: "Link Loss",
        .txPowerService: "Tx Power",
        .currentTimeService: "Current Time",
        .healthThermometer: "Health Thermometer",
        .deviceInformation: "Device Information",
        .heartRate: "Heart Rate",
        .battery: "Battery",
        .bloodPressure: "Blood Pressure",
        .humanInterfaceDevice: "Human Interface Device",
        .runningSpeedAndCadence: "Running Speed and Cadence",
        .cyclingSpeedAndCadence: "Cycling Speed and Cadence",
        .environmentalSensing: "Environmental Sensing",
        .deviceName: "Device Name",
        .appearance: "Appearance",
        .peripheralPreferredConnectionParameters: "Peripheral Preferred Connection Parameters",
        .serviceChanged: "Service Changed",
        .batteryLevel: "Battery Level",
        .temperatureMeasurement: "Temperature Measurement",
        .temperatureType: "Temperature Type",
        .systemID: "System ID",
        .modelNumberString: "Model Number String",
        .serialNumberString: "Serial Number String",
        .firmwareRevisionString: "Firmware Revision String",
        .hardwareRevisionString: "Hardware Revision String",
        .softwareRevisionString: "Software Revision String",
        .manufacturerNameString: "Manufacturer Name String",
        .pnpID: "PnP ID",
        .heartRateMeasurement: "Heart Rate Measurement",
        .bodySensorLocation: "Body Sensor Location",
        .heartRateControlPoint: "Heart Rate Control Point",
        .clientSupportedFeatures: "Client Supported Features",
        .databaseHash: "Database Hash",
        .characteristicExtendedProperties: "Characteristic Extended Properties",
        .characteristicUserDescription: "Characteristic User Description",
        .clientCharacteristicConfiguration: "Client Characteristic Configuration",
        .serverCharacteristicConfiguration: "Server Characteristic Configuration",
        .characteristicPresentationFormat: "Characteristic Presentation Format",
        .characteristicAggregateFormat: "Characteristic Aggregate Format",
        .primaryService: "Primary Service",
        .secondaryService: "Secondary Service",
        .include: "Include",
        .characteristicDeclaration: "Characteristic",
    ]
}
