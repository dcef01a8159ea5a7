hoard = []
while True:
    hoard.append(bytearray(32 * 1024 * 1024))
