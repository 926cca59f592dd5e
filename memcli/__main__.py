from memcli.cli import main

main()
