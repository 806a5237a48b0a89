from grader.launch import main

main()
