/// More SIG-assigned names, beyond those with a constant in `BluetoothUUID+Names.swift`: the services,
/// characteristics and descriptors a tool meets most, as the Bluetooth SIG's Assigned Numbers document lists them
/// (3.4 GATT Services, 3.7 Descriptors, 3.8 Characteristics). `name` looks here after `names`.
extension BluetoothUUID {
    static let assignedNames: [BluetoothUUID: String] = {
        let table: [(UInt16, String)] = [
            // Services
            (0x1806, "Reference Time Update"), (0x1807, "Next DST Change"), (0x1808, "Glucose"),
            (0x1811, "Alert Notification"), (0x1813, "Scan Parameters"), (0x1818, "Cycling Power"),
            (0x1819, "Location and Navigation"), (0x181B, "Body Composition"), (0x181C, "User Data"),
            (0x181D, "Weight Scale"), (0x181E, "Bond Management"), (0x181F, "Continuous Glucose Monitoring"),
            (0x1820, "Internet Protocol Support"), (0x1821, "Indoor Positioning"), (0x1822, "Pulse Oximeter"),
            (0x1823, "HTTP Proxy"), (0x1824, "Transport Discovery"), (0x1825, "Object Transfer"),
            (0x1826, "Fitness Machine"), (0x1827, "Mesh Provisioning"), (0x1828, "Mesh Proxy"),
            (0x183A, "Insulin Delivery"), (0x1844, "Volume Control"), (0x1846, "Coordinated Set Identification"),
            (0x184E, "Audio Stream Control"), (0x1850, "Published Audio Capabilities"), (0x1854, "Hearing Access"),
            // Characteristics
            (0x2A02, "Peripheral Privacy Flag"), (0x2A03, "Reconnection Address"), (0x2A06, "Alert Level"),
            (0x2A07, "Tx Power Level"), (0x2A08, "Date Time"), (0x2A09, "Day of Week"), (0x2A0A, "Day Date Time"),
            (0x2A0C, "Exact Time 256"), (0x2A0D, "DST Offset"), (0x2A0E, "Time Zone"),
            (0x2A0F, "Local Time Information"), (0x2A11, "Time with DST"), (0x2A12, "Time Accuracy"),
            (0x2A13, "Time Source"), (0x2A14, "Reference Time Information"), (0x2A16, "Time Update Control Point"),
            (0x2A17, "Time Update State"), (0x2A18, "Glucose Measurement"), (0x2A1E, "Intermediate Temperature"),
            (0x2A1F, "Temperature Celsius"), (0x2A20, "Temperature Fahrenheit"), (0x2A21, "Measurement Interval"),
            (0x2A22, "Boot Keyboard Input Report"),
            (0x2A2A, "IEEE 11073-20601 Regulatory Certification Data List"), (0x2A2B, "Current Time"),
            (0x2A31, "Scan Refresh"), (0x2A32, "Boot Keyboard Output Report"), (0x2A33, "Boot Mouse Input Report"),
            (0x2A34, "Glucose Measurement Context"), (0x2A35, "Blood Pressure Measurement"),
            (0x2A36, "Intermediate Cuff Pressure"), (0x2A3F, "Alert Status"), (0x2A40, "Ringer Control Point"),
            (0x2A41, "Ringer Setting"), (0x2A42, "Alert Category ID Bit Mask"), (0x2A43, "Alert Category ID"),
            (0x2A44, "Alert Notification Control Point"), (0x2A45, "Unread Alert Status"), (0x2A46, "New Alert"),
            (0x2A47, "Supported New Alert Category"), (0x2A48, "Supported Unread Alert Category"),
            (0x2A49, "Blood Pressure Feature"), (0x2A4A, "HID Information"), (0x2A4B, "Report Map"),
            (0x2A4C, "HID Control Point"), (0x2A4D, "Report"), (0x2A4E, "Protocol Mode"),
            (0x2A4F, "Scan Interval Window"), (0x2A51, "Glucose Feature"), (0x2A52, "Record Access Control Point"),
            (0x2A53, "RSC Measurement"), (0x2A54, "RSC Feature"), (0x2A55, "SC Control Point"), (0x2A56, "Digital"),
            (0x2A58, "Analog"), (0x2A5A, "Aggregate"), (0x2A5B, "CSC Measurement"), (0x2A5C, "CSC Feature"),
            (0x2A5D, "Sensor Location"), (0x2A63, "Cycling Power Measurement"), (0x2A64, "Cycling Power Vector"),
            (0x2A65, "Cycling Power Feature"), (0x2A66, "Cycling Power Control Point"), (0x2A67, "Location and Speed"),
            (0x2A68, "Navigation"), (0x2A6C, "Elevation"), (0x2A6D, "Pressure"), (0x2A6E, "Temperature"),
            (0x2A6F, "Humidity"), (0x2A70, "True Wind Speed"), (0x2A71, "True Wind Direction"),
            (0x2A72, "Apparent Wind Speed"), (0x2A73, "Apparent Wind Direction"), (0x2A74, "Gust Factor"),
            (0x2A75, "Pollen Concentration"), (0x2A76, "UV Index"), (0x2A77, "Irradiance"), (0x2A78, "Rainfall"),
            (0x2A79, "Wind Chill"), (0x2A7A, "Heat Index"), (0x2A7B, "Dew Point"), (0x2A98, "Weight"),
            (0x2A9B, "Body Composition Feature"), (0x2A9C, "Body Composition Measurement"),
            (0x2A9D, "Weight Measurement"), (0x2A9E, "Weight Scale Feature"), (0x2AA6, "Central Address Resolution"),
            (0x2AA7, "CGM Measurement"), (0x2AC9, "Resolvable Private Address Only"),
            (0x2B3A, "Server Supported Features"),
            // Descriptors
            (0x2906, "Valid Range"), (0x2907, "External Report Reference"), (0x2908, "Report Reference"),
            (0x2909, "Number of Digitals"), (0x290A, "Value Trigger Setting"),
            (0x290B, "Environmental Sensing Configuration"), (0x290C, "Environmental Sensing Measurement"),
            (0x290D, "Environmental Sensing Trigger Setting"), (0x290E, "Time Trigger Setting"),
        ]
        return Dictionary(table.map { (BluetoothUUID($0.0), $0.1) }, uniquingKeysWith: { first, _ in first })
    }()
}
