print("ble: not yet")
