import CacheCLI
CachectlMain.run()
