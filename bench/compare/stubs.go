package main

func evidenceRows(c *config) []Row { return nil }
func sandboxRows(c *config) []Row  { return nil }
func amberRows(c *config) []Row    { return nil }
func goBenchRows(c *config) []Row  { return nil }
