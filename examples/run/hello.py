name = input().strip()
print(f"hello, {name}")
